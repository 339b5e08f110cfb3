"""Starting training runs as processes: the one command line a run starts with (`train_command`), the app's
background runs (one run, a run and its twin under another method, a run on seeds picked from the catalog) and
an experiment's runs in the foreground, one after another (`train_to_end`, rods_lab.experiments.runner).

A run is started as `python -m rods_lab.cli train --config <runs/<id>/launch.yaml> --run-id <id>` in its
own session (start_new_session=True), so it survives page reloads and app restarts; its Run row is
created as `queued` first with the id we pass, then the trainer registers itself as `running`
(rods_lab.status shows a run that dies before that as failed). Starting and stopping are for launchers
(rods_lab.identity): each service takes the acting user, refuses anyone else, and records who it was. A run
starts with the environment its LaunchPolicy names (rods_lab.launch_policy), not the app's, so the host's
secrets stay in the app.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from rods_core.benchmarks.leaks import refuse_test_tasks
from rods_core.benchmarks.registry import make_benchmark, task_type_of
from rods_core.benchmarks.task_files import write_tasks
from rods_core.config import RunConfig, dump_config
from rods_core.ids import check_run_id, new_run_id
from rods_core.process_identity import process_start
from rods_lab import processes
from rods_lab.configs import build_config
from rods_lab.identity import Actor, require
from rods_lab.launch_policy import LaunchPolicy
from rods_lab.paths import PROJECT_ROOT, AppPaths
from rods_lab.status import LOG_FILE
from storage.catalog import catalog_tasks
from storage.control import ControlDB

LAUNCH_FILE = "launch.yaml"


def train_command(config: str | Path, run_id: str, *, resume: bool = False, options: Sequence[str] = ()) -> list[str]:
    """`rods train` of run `run_id` from `config` in this Python (`resume`: the run folder's run, from its last
    checkpoint), with further options (`--set k=v`, `--processes N`): every run starts with this command line,
    whether the app, an experiment or a benchmark starts it."""
    how = ["--resume", run_id] if resume else ["--run-id", run_id]
    return [sys.executable, "-m", "rods_lab.cli", "train", "--config", str(config), *how, *options]


def train_to_end(
    config: str | Path, run_id: str, log: IO, *, resume: bool = False, timeout_s: float | None = None
) -> int | str:
    """Run `train_command` in the foreground with its output on `log`; its exit code, or "timeout" when it ran
    past `timeout_s`. An experiment's runs go this way, one after another (they share the cores; a crash or
    out-of-memory ends one run, not the experiment). The run leads its own process group, which is stopped whole
    when it times out or the experiment is stopped (SIGTERM, Ctrl-C): accelerate's workers never outlive the
    experiment that launched them, where one left behind would hold the run's lock and fail its resume."""
    proc = subprocess.Popen(
        train_command(config, run_id, resume=resume), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _interrupted) if in_main else None
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        stop_group(proc)
        return "timeout"
    except BaseException:
        stop_group(proc)
        raise
    finally:
        if in_main:
            signal.signal(signal.SIGTERM, previous)


def _interrupted(signum: int, _frame) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def stop_group(proc: subprocess.Popen, grace_s: float = 30.0) -> None:
    """SIGTERM to the process group `proc` leads (a run checkpoints nothing on it; its workers exit), SIGKILL
    to what is left of the group after `grace_s`: the leader may exit first, its workers still running."""
    deadline = time.monotonic() + grace_s
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        while _group_alive(proc) and time.monotonic() < deadline:
            time.sleep(0.1)
    proc.wait()


def _group_alive(proc: subprocess.Popen) -> bool:
    """Whether a process of `proc`'s group is running (the leader reaped first: a zombie still counts)."""
    proc.poll()
    try:
        os.killpg(proc.pid, 0)
    except ProcessLookupError:
        return False
    return True


@dataclass(frozen=True)
class Launched:
    run_id: str
    pid: int
    run_dir: Path
    log_path: Path


def launch_run(
    cfg: RunConfig, paths: AppPaths, run_id: str | None = None, *, actor: Actor, policy: LaunchPolicy = LaunchPolicy()
) -> Launched:
    """Create the Run row (queued, with who launched it), write the config, start `rods train` in its own
    session with the environment `policy` allows. Refused (rods_lab.identity.Refused) unless `actor` is a
    launcher; ValueError when the config names an API key variable the policy does not allow."""
    require(actor, "launcher", "launch runs")
    if problem := policy.api_key_problem(cfg.synthesis.api_key_env):
        raise ValueError(problem)
    run_id = check_run_id(run_id) if run_id else new_run_id(cfg.name)
    run_dir = Path(cfg.output_dir) / run_id
    if run_dir.exists():
        raise FileExistsError(f"run folder {run_dir} exists already; pick another run id")
    run_dir.mkdir(parents=True)
    config_path = run_dir / LAUNCH_FILE
    config_path.write_text(dump_config(cfg), encoding="utf-8")
    db = paths.db()
    processes.reap_children({r.pid for r in db.list_runs() if r.pid})  # runs this app launched that ended
    db.create_run(
        run_id,
        run_dir,
        cfg.model_dump(mode="json"),
        cfg.method,
        name=cfg.name,
        by=actor.name or None,
        signed=actor.signed,
    )
    log_path = run_dir / LOG_FILE
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            train_command(config_path, run_id),
            cwd=PROJECT_ROOT,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**policy.run_environment(os.environ, cfg.synthesis.api_key_env), "PYTHONUNBUFFERED": "1"},
        )
    db.update_run(run_id, pid=proc.pid, proc_start=process_start(proc.pid))
    return Launched(run_id, proc.pid, run_dir, log_path)


def pair_configs(cfg: RunConfig, twin: str = "static") -> list[RunConfig]:
    """The configured run and its twin under another method: same seeds, seed, model and batch, the cores
    split between them (half the processes each, at least one). The batch stays the config's (tasks_per_step
    is per process, so it grows as the processes halve): the twins run the demo's design, not half of it."""
    if cfg.method == twin:
        raise ValueError(f"the run's method is {twin} already; pick another method to pair it with {twin}")
    share = max(1, cfg.compute.processes // 2)
    batch = cfg.grpo.tasks_per_step * cfg.compute.processes
    per_process = batch // share if batch % share == 0 else cfg.grpo.tasks_per_step
    out = []
    for method, name in ((cfg.method, cfg.name), (twin, f"{cfg.name}_{twin}"[:80])):
        data = cfg.model_dump()
        data.update(method=method, name=name)
        data["compute"]["processes"] = share
        data["grpo"]["tasks_per_step"] = per_process
        out.append(RunConfig.model_validate(data))
    return out


def launch_pair(
    cfg: RunConfig, paths: AppPaths, twin: str = "static", *, actor: Actor, policy: LaunchPolicy = LaunchPolicy()
) -> list[Launched]:
    """Launch `pair_configs(cfg, twin)`: the run and its twin, side by side."""
    require(actor, "launcher", "launch runs")  # before the first of the two starts
    if problem := policy.api_key_problem(cfg.synthesis.api_key_env):
        raise ValueError(problem)
    return [launch_run(c, paths, actor=actor, policy=policy) for c in pair_configs(cfg, twin)]


def stop_run(db: ControlDB, run_id: str, actor: Actor) -> bool:
    """Stop a run (SIGTERM to its process group), recording who stopped it; for launchers only."""
    require(actor, "launcher", "stop runs")
    return processes.stop_run(db, run_id, by=actor.name or None, signed=actor.signed)


def launch_on_seeds(
    db: ControlDB,
    task_ids: list[str],
    base: str | Path,
    name: str,
    overrides: dict[str, Any],
    paths: AppPaths,
    *,
    actor: Actor,
    policy: LaunchPolicy = LaunchPolicy(),
) -> tuple[Launched, Path]:
    """Write the chosen catalog seeds to <workspace>/subsets/ and launch `base` on them (seeds.subset=file).
    The actor's role, the config and the seeds are checked first, so a refusal leaves no subset file behind."""
    require(actor, "launcher", "launch runs")
    tasks = catalog_tasks(db, task_ids)
    if not tasks:
        raise ValueError("choose at least one seed")
    file = paths.workspace / "subsets" / f"{new_run_id(name)}.jsonl"
    cfg = build_config(
        base,
        # the chosen seeds are the pool: the base config's own pick (ids, limit) does not apply to them
        {"name": name, "seeds.subset": "file", "seeds.file": str(file), "seeds.ids": None, "seeds.limit": None}
        | overrides,
        paths,
        check_seeds=False,
    )
    kind = task_type_of(cfg.benchmark)
    other = sorted(t.id for t in tasks if type(t) is not kind)
    if other:
        raise ValueError(
            f"seed(s) {', '.join(other[:5])} are not {cfg.benchmark} tasks, which the config trains on: pick seeds "
            f"of one benchmark and a config whose `benchmark:` is theirs"
        )
    refuse_test_tasks(
        tasks, "a run on catalog seeds", make_benchmark(cfg.benchmark, options=cfg.benchmark_options).leak_reason
    )
    write_tasks(file, tasks)
    return launch_run(cfg, paths, actor=actor, policy=policy), file
