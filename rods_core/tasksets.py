"""The task sets of a run: its seeds (from the config) and its held-out evaluation tasks.

A seed file passes the task-file door (rods_core.benchmarks.task_files.load_task_file: schema, replay by execution, the
leak guard) whatever route it came through (`seeds.subset: file`, `--set seeds.file=…`, the app's seed
subsets), before anything of the run is created.
"""

from __future__ import annotations

import random
from pathlib import Path

from rods_core.benchmarks.protocols import Benchmark
from rods_core.benchmarks.registry import make_benchmark
from rods_core.benchmarks.task_files import load_task_file, read_tasks
from rods_core.config import CATEGORIES, RunConfig
from rods_core.rng import derive_seed


class TaskSetError(ValueError):
    """The configured task set cannot be used; the message names the field and the reason."""


def run_benchmark(cfg: RunConfig, *, scratch: Path | None = None) -> Benchmark:
    """The config's benchmark (`benchmark:`, `benchmark_options:`, its synthesizer with the run's `synthesis:`
    settings, verifying inside `scratch`: the run's scratch folder), built once by whoever runs the config and
    passed to the task sets, the RODS step and the warm start."""
    return make_benchmark(cfg.benchmark, options=cfg.benchmark_options, synth=cfg.synthesis, scratch=scratch)


def in_groups(bench: Benchmark, tasks: list, groups: list[str]) -> list:
    """The tasks of the named groups (`seeds.categories`, `eval.categories`: `Benchmark.group_of`); all of them
    while the field keeps its default, which the config requires of a benchmark without categories."""
    return tasks if list(groups) == list(CATEGORIES) else [t for t in tasks if bench.group_of(t) in groups]


def select_seeds(cfg: RunConfig, benchmark: Benchmark) -> list:
    """The seeds the config names: the benchmark's train split or a file of its tasks (through its schema,
    verifier and leak guard; BFCL multi-turn's demo subset too), filtered by group and limit or drawn at
    random; test-split tasks are refused."""
    s, bench = cfg.seeds, benchmark
    if s.subset == "demo":  # the config allows it only on a benchmark that declares demo seeds (`demo_seeds`)
        tasks = bench.demo_seeds()
    elif s.subset == "file":
        # the task-file door: schema, replay by execution, and the leak guard, all or nothing
        tasks = load_task_file(s.file, "seeds.file", benchmark=bench)
    else:
        tasks = bench.seeds("train")
    return _pick(in_groups(bench, tasks, s.categories), cfg, s.subset)


def _pick(tasks: list, cfg: RunConfig, source: str) -> list:
    """`seeds.ids` (in their order) and `seeds.limit` applied to the candidate seeds of `source`."""
    s = cfg.seeds
    if s.ids:
        by_id = {t.id: t for t in tasks}
        missing = [i for i in s.ids if i not in by_id]
        if missing:
            raise TaskSetError(f"seeds.ids: {missing[:5]} not in the {source} seeds ({len(missing)} missing)")
        tasks = [by_id[i] for i in dict.fromkeys(s.ids)]
    if s.limit:
        tasks = tasks[: s.limit]
    if s.random is not None:
        tasks = random_draw(tasks, s.random.n, s.random.seed)
    if not tasks:
        raise TaskSetError("seeds: the selection is empty; widen seeds.categories or seeds.limit")
    return tasks


def random_draw(tasks: list, n: int, seed: int) -> list:
    """n tasks drawn uniformly without replacement by `seed` (`seeds.random`: a pool nobody picked), in id order;
    the draw depends on the ids available, never on their order."""
    if n > len(tasks):
        raise TaskSetError(
            f"seeds.random.n: {n} tasks asked but the selection holds {len(tasks)}; lower seeds.random.n or widen "
            "seeds.subset / seeds.categories"
        )
    pool = sorted(tasks, key=lambda t: t.id)
    return sorted(random.Random(seed).sample(pool, n), key=lambda t: t.id)


def fresh_variants(parents: list, per_parent: int, cfg: RunConfig, purpose: str, benchmark: Benchmark) -> list:
    """Verified variants of the parents for one purpose ("warm-start", "eval"), seeded from the run seed, by
    the benchmark's synthesizer (none: no variants); none equals a parent or an earlier variant by content."""
    synth = benchmark.synthesizer
    if synth is None:
        return []
    seed, keys, variants = derive_seed(cfg.seed, purpose), {p.content_key() for p in parents}, []
    for parent in parents:
        for v in synth.variants(parent, per_parent, seed).accepted:
            if v.content_key() not in keys:
                keys.add(v.content_key())
                variants.append(v)
    return variants


def eval_tasks(cfg: RunConfig, seeds: list, trained_on: set[str], benchmark: Benchmark) -> list:
    """Held-out tasks of the benchmark (the run's): its test split, the seeds, a file, or
    with split=variants fresh variants of the seeds that the warm start never saw."""
    e, bench = cfg.eval, benchmark
    if e.split == "variants":
        tasks = fresh_variants(seeds, e.variants_per_seed, cfg, "eval-variants", bench)
        tasks = [t for t in tasks if t.id not in trained_on]  # variant ids are content hashes
    elif e.split == "train":
        tasks = seeds
    elif e.split == "file":
        return read_task_file(e.file, bench)[: e.limit] if e.limit else read_task_file(e.file, bench)
    else:
        tasks = bench.seeds("test")
    tasks = in_groups(bench, tasks, e.categories)
    return tasks[: e.limit] if e.limit else tasks


def read_task_file(path: str, benchmark: Benchmark) -> list:
    """A JSONL task file read by the benchmark's schema alone (held-out sets hold test-split tasks, which the
    training door refuses)."""
    return read_tasks(path, benchmark.task_type)


HELDOUT_REASON = "equals a task of the held-out set"  # the variant events' reason the report counts


def heldout_keys(files: list[str], benchmark: Benchmark) -> dict[str, str]:
    """Content key -> file stem of every task in `files` (synthesis.exclude): what no variant may equal."""
    return {t.content_key(): Path(f).stem for f in files for t in read_task_file(f, benchmark)}
