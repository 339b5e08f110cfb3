"""The one model builder: a missing model is built by `rods model demo` in as many processes as the run that needs
it would build it in. A one-process CPU run (each run of the app's pair) hands its build to every core, since the
warm start is data-parallel and one core would build while the others idle; an experiment builds once before its
runs, so they never race to build it and get the model their own `rods train` would have built."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from rods_core.build import build_processes, ensure_model, usable_cores
from rods_core.config import RunConfig, dump_config
from rods_core.policy.tiny import ModelFolderError


def build_command(config: Path, processes: int, for_run: Path | None = None) -> list[str]:
    """`rods model demo` of `config`'s model in `processes` processes (`for_run`: as that run's build, recorded in
    its folder)."""
    cmd = [
        sys.executable,
        "-m",
        "rods_lab.cli",
        "model",
        "demo",
        "--config",
        str(config),
        "--processes",
        str(processes),
    ]
    return cmd + (["--for-run", str(for_run)] if for_run is not None else [])


def run_build(cmd: list[str]) -> None:
    """Run a build command with this process's stdout and stderr (a run's log) in its process group (the app's
    Stop ends both); ModelFolderError when it fails."""
    rc = subprocess.run(cmd, check=False).returncode
    if rc != 0:
        raise ModelFolderError(
            f"the model build `rods {' '.join(cmd[3:])}` exited with code {rc} (its output is above)"
        )


def every_core_build(cfg: RunConfig, run_dir: Path) -> Callable[[], None] | None:
    """The delegate `ensure_model` calls to build the run's missing model with every core, or None when the
    run's own processes already use them (or it trains on GPUs, where the build's processes are its GPUs)."""
    n = build_processes(cfg, usable_cores())
    if n == cfg.compute.processes:
        return None
    cmd = build_command(run_dir / "config.yaml", n, for_run=run_dir)
    return lambda: run_build(cmd)


def build_before_runs(cfg: RunConfig, config_file: Path, log=print) -> None:
    """Build `cfg`'s model before an experiment's runs (if allowed and missing; `config_file`: where its config is
    written for the build), in the processes the runs' own `rods train` would build it in (`build_processes`): a
    build in the experiment's one process would be another model than the one a 2-process run of the config builds."""

    def build() -> None:
        config_file.parent.mkdir(parents=True, exist_ok=True)
        config_file.write_text(dump_config(cfg))
        run_build(build_command(config_file, build_processes(cfg, usable_cores())))

    ensure_model(cfg, log, delegate=build)
