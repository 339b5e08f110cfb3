"""One build per model folder: the pair the app launches on a missing model folder builds it once; the
second run waits for the first one's build (its build.json says whose) and both train on it."""

from __future__ import annotations

import threading
import time

from polling import wait_until

from rods_core.build import build_lock, build_processes, lock_holder, lock_path, usable_cores
from rods_core.config import RunConfig
from rods_core.policy.tiny import read_card
from rods_lab.configs import build_config
from rods_lab.identity import local
from rods_lab.launch import launch_pair
from rods_lab.model_build import build_before_runs
from rods_lab.paths import AppPaths
from rods_lab.status import run_status
from storage.build_progress import read_build_progress
from tests.conftest import smoke_config

# A build of seconds: a small tokenizer and model, two SFT epochs, no variants.
FAST_BUILD = {
    "model.build_if_missing": True,
    "model.tiny": {"hidden": 32, "layers": 1, "heads": 2, "kv_heads": 1, "ffn": 64, "vocab": 1000},
    "model.sft": {"max_epochs": 2, "loss_target": 1e-6, "warmup_steps": 0},
    "model.sft_variants_per_seed": 0,
    "grpo.max_steps": 2,
}


def test_a_second_holder_waits_and_is_told_who_builds(tmp_path):
    model = tmp_path / "models" / "m"
    told, order = [], []

    def second() -> None:
        with build_lock(model, "run b", told.append):
            order.append("b")

    with build_lock(model, "run a", told.append):
        assert lock_holder(lock_path(model)) == "run a"
        waiter = threading.Thread(target=second)
        waiter.start()
        wait_until(lambda: told, what="the second holder to find the lock taken")
        time.sleep(0.2)
        order.append("a")  # the second is still waiting
    waiter.join(timeout=30)
    assert told == ["run a"] and order == ["a", "b"]
    assert lock_path(model).read_text() == ""  # released: names nobody


def test_a_pair_launched_on_a_missing_model_builds_it_once_and_both_train(tmp_path):
    paths = AppPaths(tmp_path / "ws", tmp_path / "runs")
    data = smoke_config(tmp_path, paths.workspace / "models" / "tiny-fast", **FAST_BUILD)
    cfg = build_config(data, {}, paths)
    assert cfg.model.build_if_missing and cfg.compute.processes == 1
    runs = launch_pair(RunConfig.model_validate(cfg.model_dump()), paths, actor=local("test"))
    db = paths.db()
    wait_until(
        lambda: all(run_status(db, db.get_run(r.run_id)) not in ("queued", "running") for r in runs),
        timeout=600,
        what="both runs to end",
    )
    logs = {r.run_id: r.log_path.read_text() for r in runs}
    assert [db.get_run(r.run_id).status for r in runs] == ["finished", "finished"], logs
    builders = [rid for rid, text in logs.items() if "building the tiny model" in text]
    assert len(builders) == 1, logs
    (other,) = set(logs) - set(builders)
    # the other run either waited for that build (and said whose) or found it done
    if "waiting for that build" in logs[other]:
        assert f"being built by run {builders[0]}" in logs[other]
    assert {read_build_progress(r.run_dir).phase for r in runs} == {"done"}
    model = paths.workspace / "models" / "tiny-fast"
    assert (model / "config.json").exists()
    # each run has one process, yet the build's warm start ran in as many processes as there are cores
    (sft,) = [s for s in read_card(model)["stages"] if s["stage"] == "sft"]
    assert sft["sft/processes"] == usable_cores()


def test_a_missing_model_builds_in_the_runs_own_processes_or_every_core_for_a_one_process_cpu_run(tmp_path):
    def cfg(processes: int, cpu: bool = True) -> RunConfig:
        data = smoke_config(tmp_path, tmp_path / "m", **{"compute.processes": processes, "grpo.use_cpu": cpu})
        return RunConfig.model_validate(data)

    assert build_processes(cfg(1), 4) == 4  # a one-process run hands its build to every core
    assert build_processes(cfg(1), 1) == 1
    assert build_processes(cfg(2), 16) == 2  # a launched run builds in its own processes
    assert build_processes(cfg(4, cpu=False), 16) == 4  # on GPUs: one process a GPU


def test_the_bench_builds_the_model_its_runs_would_build(tmp_path):
    # `rods bench` runs in one process; its runs here in two. The warm start is data-parallel, so a build in the
    # bench's own process made another model than a run of the same config does.
    model = tmp_path / "models" / "tiny-fast"
    cfg = RunConfig.model_validate(smoke_config(tmp_path, model, **FAST_BUILD, **{"compute.processes": 2}))
    build_before_runs(cfg, tmp_path / "experiment" / "configs" / "model-build.yaml", log=lambda *_: None)
    (sft,) = [s for s in read_card(model)["stages"] if s["stage"] == "sft"]
    assert sft["sft/processes"] == 2
