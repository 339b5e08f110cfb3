"""An experiment's held-out sets, made once, saved with it and hashed, shared by every arm and run seed:

- H1: `h1_per_seed` fresh variants of every pool seed (does training generalise within the pool's structures?);
- H2: `h2_per_seed` variants of each of `h2_seeds` train-split seeds outside the pool (transfer); with
  `h2_solvable`, named H1b: only parents the warm-started model scores above 0 greedily (new scenarios the policy
  can start on; every candidate parent's score and those that passed are recorded);
- H3: `h3` BFCL test-split tasks of the pool's categories (the benchmark's own held-out split).

Each set is exactly the size asked: a seed whose variants come short is tried again with more attempts (up to
`max_attempts`), and if it still falls short the build stops with every seed's yield (H2 moves on to the next
drawn seed instead: its parents are not fixed by the design). H1 and H2 variants differ by content from every
pool seed and from each other. Training tasks are checked against the sets by content (`collisions`); a run
rejects a colliding variant as it arrives (run config `synthesis.exclude`, rods_core.step.reject_heldout).
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from rods_core.benchmarks.protocols import DemoSeeds, TaskRecord
from rods_core.benchmarks.registry import DEFAULT_BENCHMARK, make_benchmark, task_type_of
from rods_core.benchmarks.task_files import read_tasks, write_tasks
from rods_core.config import RunConfig, SynthesisConfig
from rods_core.config.benchmark_entries import benchmark_entry
from rods_core.evaluation import EvalConfig, evaluate
from rods_core.rng import derive_seed
from rods_core.tasksets import fresh_variants, run_benchmark

MANIFEST = "manifest.json"


class HeldOutShort(ValueError):
    """A held-out set could not be made at the size asked; the message gives the yield per seed."""


@dataclass(frozen=True)
class HeldOutSpec:
    """The sizes of an experiment's held-out sets and the seed of their draws."""

    h1_per_seed: int = 8
    h2_seeds: int = 16
    h2_per_seed: int = 4
    h3: int = 100
    seed: int = 0
    max_attempts: int = 400  # candidates per parent at most, raised step by step from the synth config's
    h2_solvable: bool = False  # H2's parents only seeds the warm-started model scores above 0 greedily: set H1b
    h1_samples: int = 0  # H1 also scored sampled, this many plays a task at the run's temperature (step 0, last)
    # the fewest H1 variants a pool seed may yield (None: h1_per_seed, every seed its full share); a seed the
    # synthesizer varies less often gives what it yields, recorded in the manifest's yields
    h1_min_per_seed: int | None = None
    # the fewest H2 (H1b) parents the set may have (None: h2_seeds); fewer pass H1b's progress filter on some pools
    h2_min_seeds: int | None = None

    def names(self) -> tuple[str, str, str]:
        """The sets' names: H1, H2 (H1b when its parents are filtered by the warm start's progress), H3."""
        return ("H1", "H1b" if self.h2_solvable else "H2", "H3")


def _variants(parent: TaskRecord, k: int, keys: set[str], cfg: SynthesisConfig, cap: int, benchmark: str) -> list:
    """Up to k verified variants of `parent` by the benchmark's synthesizer, none in `keys`; attempts raised x4 from
    the config's until k or `cap`. (The synthesizer adds the parent's own key to `keys`: every H1 parent's is
    there already, and no variant equals its parent, so the sets are those the pipeline made when called directly.)"""
    attempts = cfg.max_attempts
    while True:
        bench = make_benchmark(benchmark, synth=cfg.model_copy(update={"max_attempts": attempts}))
        got = bench.synthesizer.variants(parent, k, cfg.seed, keys).accepted
        if len(got) >= k or attempts >= cap:
            return got[:k]
        attempts = min(cap, attempts * 4)


def build(
    pool: list[TaskRecord],
    spec: HeldOutSpec,
    synth: SynthesisConfig,
    out: Path,
    trained: list[TaskRecord] = (),
    parent_progress: Callable[[list[TaskRecord]], dict[str, float]] | None = None,
    benchmark: str = DEFAULT_BENCHMARK,
) -> dict:
    """Make H1, H2 (or H1b), H3 for a pool of seeds into `out` (JSONL per set + manifest.json with sizes, yields
    and sha256); returns the manifest. `trained`: tasks the policy saw before the runs (its warm start): no held-out
    task equals one, and no H2 parent is one. `parent_progress` (task -> the warm-started model's greedy progress)
    filters H1b's parents (spec.h2_solvable). `benchmark` (the run's) gives the seeds, their groups and the
    synthesizer. Raises HeldOutShort, writing nothing, when a set cannot be made."""

    cfg = synth.model_copy(update={"seed": derive_seed(spec.seed, "heldout")})
    keys = {t.content_key() for t in [*pool, *trained]}
    bench = make_benchmark(benchmark)
    cats = sorted({bench.group_of(t) for t in pool})
    h1, yields = [], {}
    for parent in pool:
        got = _variants(parent, spec.h1_per_seed, keys, cfg, spec.max_attempts, benchmark)
        yields[parent.id] = len(got)
        keys.update(v.content_key() for v in got)
        h1 += got
    least = spec.h1_per_seed if spec.h1_min_per_seed is None else spec.h1_min_per_seed
    short = {p: n for p, n in yields.items() if n < least}
    if short:
        raise HeldOutShort(
            f"H1: {len(short)} of {len(pool)} seeds yielded fewer than {least} variants in "
            f"{spec.max_attempts} attempts: {short}; lower h1_per_seed, accept fewer (h1min=N) or drop those seeds"
        )
    pool_ids, seen = {t.id for t in pool}, {t.id for t in trained}
    outside = sorted(
        (t for t in bench.seeds("train") if bench.group_of(t) in cats and t.id not in pool_ids | seen),
        key=lambda t: t.id,
    )
    random.Random(spec.seed).shuffle(outside)
    h2, h2_meta = _outside_set(outside, spec, keys, cfg, parent_progress, benchmark)
    test = sorted((t for t in bench.seeds("test") if bench.group_of(t) in cats), key=lambda t: t.id)
    if len(test) < spec.h3:
        raise HeldOutShort(f"H3: {spec.h3} tasks asked, the test split holds {len(test)} of categories {cats}")
    h3 = sorted(random.Random(spec.seed).sample(test, spec.h3), key=lambda t: t.id)
    out.mkdir(parents=True, exist_ok=True)
    manifest = {"spec": asdict(spec), "pool": sorted(pool_ids), "warm_start_tasks_avoided": len(trained), "sets": {}}
    names = spec.names()
    sets = ((names[0], h1, {"yield_per_seed": yields}), (names[1], h2, h2_meta), (names[2], h3, {}))
    for name, tasks, extra in sets:
        path = out / f"{name}.jsonl"
        write_tasks(path, tasks)
        manifest["sets"][name] = {"file": path.name, "n": len(tasks), "sha256": sha256(path), **extra}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1))
    return manifest


def _outside_set(
    outside: list[TaskRecord], spec: HeldOutSpec, keys: set[str], cfg: SynthesisConfig, parent_progress, benchmark: str
) -> tuple[list[TaskRecord], dict]:
    """(variants, manifest extras) of the set made of seeds outside the pool, taken in `outside`'s order: every
    parent that yields `h2_per_seed` variants, until `h2_seeds` did; with spec.h2_solvable only parents whose
    warm-started greedy progress is above 0 (all candidates scored once; the scores and the passed recorded)."""
    name, extra = spec.names()[1], {}
    if spec.h2_solvable:
        if parent_progress is None:
            raise ValueError("H1b filters its parents by the warm-started model's progress: give parent_progress")
        scores = parent_progress(outside)
        outside = [t for t in outside if scores.get(t.id, 0.0) > 0]
        extra = {"parent_progress": scores, "parents_passed": [t.id for t in outside]}
    got_all, yields = [], {}
    for parent in outside:
        if len(got_all) >= spec.h2_seeds * spec.h2_per_seed:
            break
        got = _variants(parent, spec.h2_per_seed, keys, cfg, spec.max_attempts, benchmark)
        yields[parent.id] = len(got)
        if len(got) == spec.h2_per_seed:
            keys.update(v.content_key() for v in got)
            got_all += got
    least = spec.h2_seeds if spec.h2_min_seeds is None else spec.h2_min_seeds
    if len(got_all) < least * spec.h2_per_seed:
        passed = f" ({len(outside)} parents passed the progress filter)" if spec.h2_solvable else ""
        raise HeldOutShort(f"{name}: {len(got_all)} of {least * spec.h2_per_seed} variants{passed}; yields {yields}")
    return got_all, {"yield_per_seed": yields, **extra}


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def same_spec(recorded: dict, spec: HeldOutSpec) -> bool:
    """Whether a recorded spec is `spec`, a field added since it was recorded read at its default."""
    return {**asdict(HeldOutSpec()), **recorded} == asdict(spec)


def load(folder: Path, benchmark: str = DEFAULT_BENCHMARK) -> tuple[dict, dict[str, list[TaskRecord]]]:
    """(manifest, tasks by set) of a held-out folder, every file checked against its recorded hash and read by
    `benchmark`'s task model."""
    folder = Path(folder)
    manifest = json.loads((folder / MANIFEST).read_text())
    sets = {}
    for name, meta in manifest["sets"].items():
        path = folder / meta["file"]
        if sha256(path) != meta["sha256"]:
            raise ValueError(f"{path}: its sha256 differs from {folder / MANIFEST}'s; the held-out set was changed")
        sets[name] = read_tasks(path, task_type_of(benchmark))
    return manifest, sets


def collisions(tasks: list[TaskRecord], sets: dict[str, list[TaskRecord]]) -> dict[str, list[str]]:
    """Per held-out set: the ids of `tasks` equal to one of its tasks by content (ids never count)."""
    keys = {t.content_key() for t in tasks}
    by_key = {t.content_key(): t.id for t in tasks}
    return {
        name: sorted(by_key[t.content_key()] for t in held if t.content_key() in keys) for name, held in sets.items()
    }


def exclude_files(folder: Path) -> list[str]:
    """The files a run's `synthesis.exclude` names: every held-out set of the folder."""
    manifest = json.loads((Path(folder) / MANIFEST).read_text())
    return [str(Path(folder) / m["file"]) for m in manifest["sets"].values()]


SCORES = "heldout_scores.json"


def greedy_config(cfg: RunConfig) -> EvalConfig:
    """The evaluation every held-out score uses: the run's episodes, greedy, without hints."""

    sampling = cfg.episode.sampling.model_copy(update={"temperature": 0.0})
    episode = cfg.episode.model_copy(update={"sampling": sampling, "hints": False})
    return EvalConfig(episode=episode, benchmark=cfg.benchmark, prereq=cfg.prereq, max_batch=cfg.eval.max_batch)


def score_folders(
    folders: list[tuple[int, Path]], sets: dict[str, list[TaskRecord]], cfg: RunConfig, log=print
) -> list[dict]:
    """Greedy scores of model folders (step, folder) on each held-out set: per set and step n, progress,
    accuracy, and each task's progress (for paired analyses by task)."""

    ecfg = greedy_config(cfg)
    rows = []
    for step, folder in folders:
        for name, tasks in sets.items():
            r = evaluate(str(folder), tasks, ecfg)
            per_task = {k: v["progress"] for k, v in r["per_task"].items()}
            row = {"step": step, "set": name, "n": len(tasks), "progress": r["eval/progress"]}
            rows.append({**row, "accuracy": r["eval/accuracy"], "per_task": per_task})
            log(f"  {Path(folder).name} (step {step}) on {name} ({len(tasks)}): progress {r['eval/progress']:.3f}")
    return rows


def warm_start_progress(cfg: RunConfig) -> Callable[[list[TaskRecord]], dict[str, float]]:
    """tasks -> each task's greedy progress under the config's model (the warm start every run starts from):
    H1b's parent filter."""

    def progress(tasks: list[TaskRecord]) -> dict[str, float]:
        r = evaluate(str(cfg.model.path), tasks, greedy_config(cfg))
        return {k: float(v["progress"]) for k, v in r["per_task"].items()}

    return progress


def score_checkpoints(
    run_dir: Path,
    sets: dict[str, list[TaskRecord]],
    cfg: RunConfig,
    log=print,
    sampled: tuple[list[TaskRecord], int] | None = None,
) -> list[dict]:
    """score_folders over every saved checkpoint of a run, and with `sampled` (H1, samples) the last checkpoint's
    sampled score, written to <run>/heldout_scores.json. Each (checkpoint, set) score is appended to
    <run>/heldout_scores.partial.jsonl as it is made and read back by the next call: scoring cut short (a killed
    process, a session's end) resumes at the score it was making, not at the run's first checkpoint."""
    ckpts = sorted((Path(run_dir) / "checkpoints").glob("checkpoint-*"), key=lambda c: int(c.name.split("-")[1]))
    folders = [(int(c.name.split("-")[1]), c) for c in ckpts]
    partial = Path(run_dir) / PARTIAL
    kept = read_partial(partial)

    def score(folder: tuple[int, Path], name: str, tasks: list[TaskRecord], samples: int = 0) -> dict:
        """A greedy score, or with `samples` the sampled one: kept if made before, else made and kept."""
        key = score_key(folder[1], f"{name}x{samples}" if samples else name, tasks)
        if key not in kept:
            kept[key] = (sampled_score(folder, tasks, samples, cfg, log) if samples
                         else score_folders([folder], {name: tasks}, cfg, log)[0])  # fmt: skip
            with partial.open("a") as f:  # one line per score: a line cut short by a kill is dropped on reading
                f.write(json.dumps({"key": key, "row": kept[key]}) + "\n")
        return kept[key]

    rows = [score(folder, name, tasks) for folder in folders for name, tasks in sets.items()]
    if sampled and folders:
        rows.append(score(folders[-1], SAMPLED, *sampled))
    (Path(run_dir) / SCORES).write_text(json.dumps(rows))
    partial.unlink(missing_ok=True)
    return rows


PARTIAL = "heldout_scores.partial.jsonl"


def score_key(folder: Path, name: str, tasks: list[TaskRecord]) -> str:
    """What a kept score stands for: the checkpoint folder and its files (names, sizes, modification times: a
    checkpoint written again is scored again), the set's name and its tasks' records."""
    h = hashlib.sha256(f"{Path(folder).resolve()}|{name}".encode())
    for f in sorted(p for p in Path(folder).rglob("*") if p.is_file()):
        st = f.stat()
        h.update(f"{f.relative_to(folder)}|{st.st_size}|{st.st_mtime_ns}".encode())
    for t in tasks:
        h.update(json.dumps(t.to_record(), sort_keys=True).encode())
    return h.hexdigest()


def read_partial(path: Path) -> dict[str, dict]:
    """The scores a cut-short scoring kept (score_key -> row); a line a kill cut short is skipped."""
    text = path.read_text() if path.is_file() else ""
    if text and not text.endswith("\n"):  # a line a kill cut short goes, so the next score starts its own
        path.write_text(text[: text.rfind("\n") + 1])
    kept = {}
    for line in text.splitlines():
        try:
            entry = json.loads(line)
            kept[entry["key"]] = entry["row"]
        except (json.JSONDecodeError, KeyError, TypeError):
            continue
    return kept


SAMPLED = "H1_sampled"  # the set name of H1's sampled scores (never read as its greedy evaluations)


def sampled_score(folder: tuple[int, Path], tasks: list[TaskRecord], samples: int, cfg: RunConfig, log=print) -> dict:
    """A model folder's (step, folder) progress on `tasks` each played `samples` times at the run's own sampling
    temperature, torch's sampling seeded from the run seed and step (the same draws for every arm of a seed)."""
    import torch

    step, path = folder
    ecfg = greedy_config(cfg)
    ecfg = ecfg.model_copy(update={"episode": ecfg.episode.model_copy(update={"sampling": cfg.episode.sampling})})
    torch.manual_seed(derive_seed(cfg.seed, f"sampled-h1-{step}"))
    r = evaluate(str(path), [t for t in tasks for _ in range(samples)], ecfg)
    temperature = cfg.episode.sampling.temperature
    log(f"  {Path(path).name} (step {step}) on H1 sampled {samples}x at T {temperature}: {r['eval/progress']:.3f}")
    return {"step": step, "set": SAMPLED, "n": len(tasks), "samples": samples, "temperature": temperature,
            "sampled": True, "progress": r["eval/progress"], "accuracy": r["eval/accuracy"]}  # fmt: skip


FIELD_OF = {"h1": "h1_per_seed", "h1s": "h1_samples", "h1min": "h1_min_per_seed", "h2min": "h2_min_seeds"}


def parse_spec(text: str) -> HeldOutSpec | None:
    """`h1=8,h2=16x4,h3=100[,seed=0]` (H1 variants per pool seed; H2 seeds x variants; H3 test tasks), with
    `h1b=16x4` in place of h2 for H2's parents filtered by the warm start's progress (set H1b) and `h1s=4` for H1's
    sampled score (4 plays a task at the run's temperature, step 0 and last), `h1min=0` to let a pool seed the
    synthesizer cannot vary h1 times give what it yields, `h2min=N` to accept H2 (H1b) with as few as N parents,
    or `none` (the run config's own evaluation, no
    held-out sets)."""
    if text.strip().lower() == "none":
        return None
    fields: dict[str, int | bool] = {}
    try:
        for part in filter(None, (p.strip() for p in text.split(","))):
            key, _, value = part.partition("=")
            if key in ("h2", "h1b"):
                seeds, _, per = value.partition("x")
                fields.update(h2_seeds=int(seeds), h2_per_seed=int(per), h2_solvable=key == "h1b")
            elif key in ("h1", "h3", "seed", "h1s", "h1min", "h2min"):
                fields[FIELD_OF.get(key, key)] = int(value)
            else:
                raise ValueError(f"unknown key {key!r}")
    except ValueError as e:
        raise ValueError(f"--heldout {text!r}: {e}; write e.g. h1=8,h2=16x4,h3=100 (or h1b=16x4) or none") from None
    return HeldOutSpec(**fields)


def warm_start_tasks(cfg: RunConfig) -> list[TaskRecord]:
    """The tasks the demo warm start trains on when this config builds the model (rods_core.build): the
    demo seeds and their `model.sft_variants_per_seed` variants, made the same way; none for another model or
    a benchmark without demo seeds (its `options`)."""
    if "demo_seeds" not in benchmark_entry(cfg.benchmark).options or not cfg.model.build_if_missing:
        return []
    bench = run_benchmark(cfg)
    seeds = bench.demo_seeds() if isinstance(bench, DemoSeeds) else []
    per_seed = cfg.model.sft_variants_per_seed
    return seeds + (fresh_variants(seeds, per_seed, cfg, "warm-start", bench) if per_seed else [])
