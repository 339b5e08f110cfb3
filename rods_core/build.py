"""The embedded default's model build: a tiny model initialised locally and warm-started on demonstrations.

`ensure_model(cfg)` returns the config's model folder, building it first when it is missing and the
config allows (`model.build_if_missing`): init-tiny (tokenizer + weights), verified variants of the demo
seeds for diversity, then the SFT warm start (policy/sft.py), reporting each phase to `progress`.
One build per folder: runs that need the same missing folder take `build_lock` in turn, so the first
builds it (with every process it has) and the others wait, then train on what it built.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from rods_core.benchmarks.protocols import Benchmark
from rods_core.benchmarks.registry import DEFAULT_BENCHMARK, make_benchmark
from rods_core.config import RunConfig
from rods_core.config.benchmark_entries import benchmark_entry
from rods_core.policy.model_folders import model_folder
from rods_core.policy.sft import run_sft
from rods_core.policy.tiny import ModelFolderError, init_tiny
from rods_core.tasksets import TaskSetError, fresh_variants, select_seeds

LOCK_SUFFIX = ".build.lock"  # beside the folder: `models/tiny-demo.build.lock`


def lock_path(model: Path) -> Path:
    return model.with_name(model.name + LOCK_SUFFIX)


def lock_holder(lock: Path, wait_s: float = 2.0) -> str:
    """Who holds the build lock, as it wrote itself there (it writes just after taking the lock)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            text = lock.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            text = ""
        if text or time.monotonic() > deadline:
            return text or "another process"
        time.sleep(0.05)


@contextmanager
def build_lock(model: Path, holder: str, on_wait: Callable[[str], None]) -> Iterator[None]:
    """An exclusive lock (fcntl) on the folder's lock file, naming `holder` while held. Taken by another
    process: `on_wait(its holder)`, then wait for it. The kernel drops the lock if the holder dies."""
    lock = lock_path(model)
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a+", encoding="utf-8") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            on_wait(lock_holder(lock))
            fcntl.flock(f, fcntl.LOCK_EX)
        f.truncate(0)
        f.write(holder)
        f.flush()
        try:
            yield
        finally:
            f.truncate(0)  # a waiter never reads a holder that has let go


def wait_for_turn(model: Path, holder: str, poll_s: float = 1.0) -> None:
    """Ranks other than 0 of a run: wait, without a collective (gloo's would time out during another run's
    build), until their rank 0 holds the build lock or the model exists."""
    lock = lock_path(model)
    while not (model / "config.json").exists():
        try:
            if lock.read_text(encoding="utf-8").strip() == holder:
                return
        except FileNotFoundError:
            pass
        time.sleep(poll_s)


Progress = Callable[..., None]  # progress(phase, **fields): the build's phase, for the run's Home card


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, which a container or taskset narrows)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def build_processes(cfg: RunConfig, cores: int) -> int:
    """The processes a `rods train` of `cfg` builds its missing model in: its own, or all `cores` when it is a
    one-process CPU run (it hands the build to them). The warm start is data-parallel, so this number is part of
    what the weights are: one config built in 1 and in 2 processes gives two models."""
    return cores if cfg.grpo.use_cpu and cfg.compute.processes == 1 else cfg.compute.processes


def ensure_model(
    cfg: RunConfig,
    log: Callable[[str], None] = print,
    *,
    ranks=None,
    run_id: str | None = None,
    progress: Progress | None = None,
    delegate: Callable[[], None] | None = None,
    benchmark: str | None = None,
) -> Path:
    """The policy folder; builds the tiny model and warm-starts it when allowed and missing.

    With several processes every rank takes part in the SFT (data-parallel); rank 0 alone builds the
    untrained model first and writes the result. Rank 0 reports the build's phases to `progress` (a run
    writes them to its build.json), a wait for another's build of the same folder included. A run with fewer
    processes than the machine has cores gives a `delegate` that builds the folder in processes of its own
    (`rods model demo --for-run`, with every core): the SFT is data-parallel, so a one-process run would
    otherwise build on one core while the others idle. A hub id is resolved from the local
    Hugging Face cache (model_folders.model_folder). `benchmark` is the one the warm start plays
    (`warm_start_seeds`; when None BFCL multi-turn's demo seeds: the model every config builds)."""
    path = model_folder(cfg.model.path, cfg.model.build_if_missing)
    if not cfg.model.build_if_missing:
        if (path / "config.json").exists():
            return path
        raise ModelFolderError(
            f"model.path {path} holds no model; point it at a local model folder, run `rods model init-tiny` "
            "and `rods sft`, or set model.build_if_missing: true"
        )
    main = ranks is None or ranks.main
    # every rank of one launch names the same holder: the run id, else the launcher's pid
    holder = f"run {run_id}" if run_id else f"rods model demo (pid {os.getppid() if ranks else os.getpid()})"
    if not main:
        wait_for_turn(path, holder)
        if ranks.share(None):  # rank 0's verdict, once it holds the lock
            build_demo_model(cfg, log, ranks=ranks, benchmark=benchmark)
        return path
    if delegate is not None and not (path / "config.json").exists():
        # the delegate takes the same lock under the same holder and reports to the same progress; what is
        # left here finds the folder built
        delegate()
    waited = False

    def waiting(other: str) -> None:
        nonlocal waited
        waited = True
        log(f"{path} is being built by {other}: waiting for that build")
        if progress is not None:
            progress("waiting", waiting_for=other)

    with build_lock(path, holder, waiting):
        build = not (path / "config.json").exists()
        if ranks is not None:
            ranks.share(build)
        if build:
            try:
                build_demo_model(cfg, log, ranks=ranks, progress=progress, benchmark=benchmark)
            except BaseException as e:
                if progress is not None:
                    progress("failed", detail=f"{type(e).__name__}: {e}"[:2000])
                raise
    if progress is not None and (build or waited):
        progress("done")
    return path


def warm_start_seeds(cfg: RunConfig, bench: Benchmark) -> list:
    """The seeds a warm start on `bench` plays: its demo subset when it declares one (`Benchmark.demo_seeds`:
    BFCL multi-turn's single-class base seeds), else the config's seeds (`seeds.ids`, `seeds.limit` of its train
    split), so the config must be of that benchmark (its `benchmark_options` shape the demonstrations too)."""

    if "demo_seeds" in benchmark_entry(bench.name).options:
        return bench.demo_seeds()
    if bench.name != cfg.benchmark:
        raise ModelFolderError(
            f"a warm start on {bench.name} plays the config's seeds and benchmark options, but the config is of "
            f"{cfg.benchmark}; give a config with benchmark: {bench.name} (e.g. configs/memory-cpu.yaml)"
        )
    try:
        return select_seeds(cfg, bench)
    except TaskSetError as e:
        raise ModelFolderError(str(e)) from None


def build_demo_model(
    cfg: RunConfig, log: Callable[[str], None] = print, *, ranks=None, progress=None, benchmark: str | None = None
) -> dict:
    """init-tiny + verified variants + SFT warm start into cfg.model.path, on `benchmark`'s demonstrations
    (its reference policy played on `warm_start_seeds`; BFCL multi-turn's when None); returns the SFT figures."""
    benchmark = benchmark or DEFAULT_BENCHMARK
    options = cfg.benchmark_options if benchmark == cfg.benchmark else None  # BFCL's demo seeds: its own defaults
    bench = make_benchmark(benchmark, options=options, synth=cfg.synthesis)
    seeds = warm_start_seeds(cfg, bench)  # refused before anything is written
    report = progress or (lambda phase, **fields: None)
    path = Path(cfg.model.path)
    raw = path.with_name(path.name + "-init")
    log(f"building the tiny model in {raw} …")
    report("tokenizer")
    if ranks is None or ranks.main:
        init_tiny(cfg.model.tiny, raw)
    if ranks is not None:
        ranks.share(None)  # a barrier: the other ranks read the untrained model rank 0 wrote
    per_seed = cfg.model.sft_variants_per_seed
    report("variants", done=0, total=per_seed * len(seeds))
    variants = fresh_variants(seeds, per_seed, cfg, "warm-start", bench) if per_seed else []
    report("variants", done=len(variants), total=per_seed * len(seeds))
    log(
        f"warm-starting on {len(seeds)} {benchmark} seeds + {len(variants)} variants "
        f"(stops at loss {cfg.model.sft.loss_target}) …"
    )
    figures = run_sft(
        raw,
        path,
        seeds + variants,
        cfg.model.sft,
        progress=report,
        report_to=cfg.report.report_to(),
        benchmark=benchmark,
        options=options,
    )
    log(f"warm start done: {json.dumps({k: v for k, v in figures.items() if k != 'sft/loss_curve'})}")
    return figures
