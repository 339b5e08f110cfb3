"""The run in the researcher's tracker: a short run logged to TensorBoard, every step metric read back from the
event files TensorBoard stores, with the run's name and config attached; the network stays off by default."""

from __future__ import annotations

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rods_core.config import ReportSettings, RunConfig
from rods_core.tracking import network_off_by_default, tracker_environment
from storage.reader import RunReader
from storage.schema import STEP_METRICS
from tests.conftest import smoke_config


def test_a_run_logs_every_step_metric_to_tensorboard_under_its_own_name(tmp_path, tiny_model_dir, monkeypatch):
    from rods_lab.run import train

    monkeypatch.delenv("TENSORBOARD_LOGGING_DIR", raising=False)
    cfg = RunConfig.model_validate(
        smoke_config(tmp_path, tiny_model_dir, **{"grpo.max_steps": 2, "report.to": ["tensorboard"]})
    )
    run_dir = train(cfg, run_id="tracked", log=lambda *_: None)

    acc = EventAccumulator(str(run_dir / "tensorboard"), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    scalars = set(acc.Tags()["scalars"])
    assert set(STEP_METRICS) <= scalars, set(STEP_METRICS) - scalars  # boundary/*, buffer/*, synth/* included
    rows = RunReader(run_dir).query("select * from step order by step")
    for name in ("boundary/informative_share", "buffer/active", "reward/mean", "train/loss"):
        events = acc.Scalars(name)
        assert [e.step for e in events] == rows["step"].tolist(), name  # once per step, at its step
        assert [e.value for e in events] == pytest.approx(rows[name].tolist()), name
    texts = {tag: acc.Tensors(tag)[0].tensor_proto.string_val[0].decode() for tag in acc.Tags()["tensors"]}
    assert '"run_name": "tracked"' in texts["args/text_summary"]  # TRL's own: the run id as the run name
    assert '"method": "rods"' in texts["rods/config/text_summary"]  # the whole run config


def test_trackers_default_to_none_and_the_network_to_off(tmp_path):
    report = ReportSettings()
    assert report.report_to() == "none"
    env = {"WANDB_MODE": "online"}
    tracker_environment(ReportSettings(to=["wandb"]), tmp_path, env)
    assert env["HF_HUB_DISABLE_TELEMETRY"] == "1" and env["WANDB_MODE"] == "online"  # the user's choice stands


@pytest.mark.parametrize(
    ("environ", "mode", "expected"),
    [
        ({}, "configured", None),  # W&B's own default: online when logged in
        ({"WANDB_MODE": "offline"}, "configured", "offline"),  # the host's configuration stands
        ({}, "offline", "offline"),  # offline only on request
        ({"WANDB_MODE": "offline"}, "online", "online"),  # the run config's request wins
        ({}, "disabled", "disabled"),
    ],
)
def test_wandb_reports_as_configured_and_offline_only_on_request(tmp_path, environ, mode, expected):
    env = dict(environ)
    network_off_by_default(env)  # what the CLI does for every command
    tracker_environment(ReportSettings(to=["wandb"], wandb_mode=mode), tmp_path, env)
    assert env.get("WANDB_MODE") == expected and env["HF_HUB_DISABLE_TELEMETRY"] == "1"
    with pytest.raises(ValueError, match="'none' cannot be combined"):
        ReportSettings(to=["none", "tensorboard"])
