"""The pool and held-out sets each repeat of `rods bench paper` trains on and is scored on: one pool for the whole
experiment (the config's seeds; held-out sets under heldout/), or, with a pool seed base, a pool of its own per
replicate (docs/experiments/pool-replicates/design.md): repeat k of every arm draws `seeds.random` by seed
base + k and is scored on held-out sets made for that pool (heldout/r<k>/), so a result holds over pools, not for
one pool. A repeat's sets are made once, before the first of its runs that needs them, and read back
hash-checked after; the base model's scores on the sets scored after a run sit beside them (every run's step 0).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from rods_core.benchmarks.protocols import TaskRecord
from rods_core.config import RunConfig
from rods_core.tasksets import run_benchmark, select_seeds
from rods_lab.experiments.heldout import (
    SCORES,
    HeldOutSpec,
    same_spec,
    sampled_score,
    score_folders,
    warm_start_progress,
    warm_start_tasks,
)
from rods_lab.experiments.heldout import build as build_heldout
from rods_lab.experiments.heldout import load as load_heldout


@dataclass(frozen=True)
class Replicate:
    """One repeat's pool and held-out sets, shared by every arm of the repeat."""

    key: int | None  # the repeat k, or None: the experiment's one pool
    pool: list[TaskRecord]
    folder: Path | None  # its held-out folder (None: the runs use their config's own evaluation)
    manifest: dict = field(default_factory=dict)
    sets: dict[str, list[TaskRecord]] = field(default_factory=dict)

    def later_sets(self) -> dict[str, list[TaskRecord]]:
        """The sets scored on a run's checkpoints after it: all but H1, which the run scores itself."""
        return {name: tasks for name, tasks in self.sets.items() if name != "H1"}


def heldout_folder(out: Path, k: int | None) -> Path:
    """Where the held-out sets of repeat k (None: of the experiment's one pool) are kept."""
    return Path(out) / "heldout" if k is None else Path(out) / "heldout" / f"r{k}"


def with_pool_seed(cfg: RunConfig, seed: int) -> RunConfig:
    """`cfg` with its seed pool drawn by `seed` (seeds.random.seed); refused when the config draws no pool."""
    if cfg.seeds.random is None:
        raise ValueError(
            "--pool-seed-base draws each replicate's pool with seeds.random: give the pool's size, e.g. "
            "--set seeds.random.n=16 (and --set seeds.ids=null where the config picks seed ids)"
        )
    drawn = cfg.seeds.random.model_copy(update={"seed": seed})
    return cfg.model_copy(update={"seeds": cfg.seeds.model_copy(update={"random": drawn})})


def with_heldout(cfg: RunConfig, folder: Path, spec: HeldOutSpec, evals: int) -> RunConfig:
    """`cfg` evaluated in-run on the folder's H1, rejecting synthesized variants equal to any of its held-out
    tasks, and keeping a checkpoint at every evaluation (each is scored on the other sets after the run)."""
    files = [str(folder / f"{name}.jsonl") for name in spec.names()]
    ev = cfg.eval.model_copy(update={"split": "file", "file": files[0], "limit": None})
    synth = cfg.synthesis.model_copy(update={"exclude": files})
    grpo = cfg.grpo.model_copy(update={"save_steps": ev.every, "save_total_limit": evals + 2})
    return cfg.model_copy(update={"eval": ev, "synthesis": synth, "grpo": grpo})


def prepare_heldout(
    cfg: RunConfig, pool: list[TaskRecord], spec: HeldOutSpec, folder: Path, log=print
) -> tuple[dict, dict]:
    """(manifest, sets) of a held-out folder: made once (H1b's parents filtered by the config's model), read back
    (hash-checked) after; the base model's scores on the sets scored after a run beside them."""
    if (folder / "manifest.json").is_file():
        manifest, sets = load_heldout(folder, cfg.benchmark)
        if not same_spec(manifest["spec"], spec):
            raise ValueError(f"{folder}: held-out sets of another spec ({manifest['spec']}); give a new --out")
    else:
        progress = warm_start_progress(cfg) if spec.h2_solvable else None
        manifest = build_heldout(pool, spec, cfg.synthesis, folder, warm_start_tasks(cfg), progress, cfg.benchmark)
        _, sets = load_heldout(folder, cfg.benchmark)
        log(f"held-out sets ({folder}): " + ", ".join(f"{k} {v['n']} tasks" for k, v in manifest["sets"].items()))
    base = folder / "base_model"
    if not (base / SCORES).is_file():
        base.mkdir(exist_ok=True)
        later = {n: t for n, t in sets.items() if n != "H1"}
        rows = score_folders([(0, Path(cfg.model.path))], later, cfg, log)
        if spec.h1_samples:
            rows.append(sampled_score((0, Path(cfg.model.path)), sets["H1"], spec.h1_samples, cfg, log))
        (base / SCORES).write_text(json.dumps(rows))
    return manifest, sets


class Replicates:
    """Each repeat's Replicate, made when first asked for: one for every repeat (`pool_seed_base` None), or one
    per repeat whose pool is drawn by seed pool_seed_base + k. `ref` is a run config of the experiment whose
    seeds are the pool's (not an offline arm's: those train on a file written from the pool)."""

    def __init__(
        self, ref: RunConfig, spec: HeldOutSpec | None, out: Path, pool_seed_base: int | None = None, log=print
    ):
        self.ref, self.spec, self.out, self.base, self.log = ref, spec, Path(out), pool_seed_base, log
        self._made: dict[int | None, Replicate] = {}
        self._pools: dict[int | None, list[TaskRecord]] = {}

    def key(self, k: int) -> int | None:
        return None if self.base is None else k

    def pool(self, k: int) -> list[TaskRecord]:
        """Repeat k's seed pool (drawn, not yet any held-out set)."""
        key = self.key(k)
        if key not in self._pools:
            cfg = self.ref if key is None else with_pool_seed(self.ref, self.base + key)
            self._pools[key] = select_seeds(cfg, run_benchmark(cfg))
        return self._pools[key]

    def get(self, k: int) -> Replicate:
        """Repeat k's pool and held-out sets, made (or read back) on the first call."""
        key = self.key(k)
        if key not in self._made:
            pool = self.pool(k)
            if self.spec is None:
                self._made[key] = Replicate(key, pool, None)
            else:
                folder = heldout_folder(self.out, key)
                manifest, sets = prepare_heldout(self.ref, pool, self.spec, folder, self.log)
                self._made[key] = Replicate(key, pool, folder, manifest, sets)
        return self._made[key]

    def _manifest(self, key: int | None) -> dict:
        """The held-out manifest of a repeat made here, else the one on disk (made in an earlier session)."""
        if key in self._made:
            return self._made[key].manifest
        path = heldout_folder(self.out, key) / "manifest.json"
        return json.loads(path.read_text()) if self.spec is not None and path.is_file() else {}

    def settings(self, repeats: int) -> dict:
        """What the manifest records: the pool (ids) and held-out sets (sizes, sha256), one of each or per repeat
        (`pools`, `replicate_heldout_sets`; `pool` is then every repeat's seeds, telling seeds from variants)."""
        keys = [None] if self.base is None else list(range(repeats))
        sets = {k: {n: {"n": v["n"], "sha256": v["sha256"]} for n, v in self._manifest(k).get("sets", {}).items()}
                for k in keys}  # fmt: skip
        if self.base is None:
            out: dict = {"pool": [t.id for t in self.pool(0)]}
            return out | ({"heldout_sets": sets[None]} if sets.get(None) else {})
        pools = {str(k): [t.id for t in self.pool(k)] for k in range(repeats)}
        return {
            "pool_seed_base": self.base,
            "pools": pools,
            "pool": sorted({i for ids in pools.values() for i in ids}),
            "replicate_heldout_sets": {str(k): v for k, v in sorted(sets.items()) if v},
        }
