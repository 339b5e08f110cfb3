"""The researcher's own tracker (trackio, TensorBoard, W&B, MLflow): TRL's `report_to`, plus every step row of
the run (the RODS metrics too) logged there under the names the run's event log uses.

TRL's integrations prefix what they log with `train/` (`train/loss`); the run's rows already carry
namespaced names (`boundary/informative_share`), so they are logged through the tracker's own client into
the same run, unprefixed. Hub telemetry is off unless the environment turns it on (HF_HUB_DISABLE_TELEMETRY=0);
a tracker the user chose in report.to reports as it is configured: W&B online when logged in (WANDB_MODE and
report.wandb_mode choose otherwise), trackio locally unless grpo.trainer_args.trackio_space_id names a Space.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from rods_core.config import ReportSettings

TENSORBOARD_DIR = "tensorboard"  # in the run folder: TRL's TensorBoard callback and the step rows write here


def network_off_by_default(environ=os.environ) -> None:
    """No Hub telemetry (TRL pings usage statistics when a trainer starts), unless the user's environment says
    otherwise. huggingface_hub reads its switch once, at import: the CLI calls this first. Trackers are left to
    the run's report settings: choosing one in report.to is asking it to report."""
    environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")


def tracker_environment(report: ReportSettings, run_dir: Path, environ=os.environ) -> None:
    """The environment a run's trackers read: the network default above, W&B's mode when report.wandb_mode
    asks for one (else W&B's own configuration stands), TensorBoard files in the run folder, the project name
    for W&B and MLflow."""
    network_off_by_default(environ)
    if report.wandb_mode != "configured":
        environ["WANDB_MODE"] = report.wandb_mode
    environ.setdefault("WANDB_PROJECT", report.project)
    environ.setdefault("MLFLOW_EXPERIMENT_NAME", report.project)
    environ["TENSORBOARD_LOGGING_DIR"] = str(Path(run_dir) / TENSORBOARD_DIR)


class StepTracker:
    """Logs step rows to the trackers of `report.to` (rank 0 only; a no-op elsewhere and with none).

    Built before TRL's trainer; the trackers' runs are opened by TRL's integration callbacks at the start of
    training, so `start` and `log` are called from the run's own callback, which TRL runs after them."""

    def __init__(self, report: ReportSettings, run_dir: Path, config: dict[str, Any], main: bool):
        self.trackers = report.trackers if main else []
        self.run_dir, self.config = Path(run_dir), config
        self._tb = None

    def start(self) -> None:
        """Attach the run config (once, at the start of training)."""
        text = json.dumps(self.config, indent=2, default=str)
        for name in self.trackers:
            if name == "tensorboard":
                from torch.utils.tensorboard import SummaryWriter

                # a second event file beside TRL's in the same folder: TensorBoard shows one run
                self._tb = SummaryWriter(log_dir=str(self.run_dir / TENSORBOARD_DIR), filename_suffix=".rods")
                self._tb.add_text("rods/config", f"```\n{text}\n```")
                self._tb.flush()
            elif name == "trackio":
                import trackio

                trackio.config.update({"rods": self.config}, allow_val_change=True)
            elif name == "wandb":
                import wandb

                wandb.config.update({"rods": self.config}, allow_val_change=True)
            elif name == "mlflow":
                import mlflow

                mlflow.log_dict(self.config, "rods_config.json")

    def log(self, row: dict[str, Any], step: int, logged_by_trl: set[str] = frozenset()) -> None:
        """One step row, its numbers under their own names, but those TRL's integration already logged under
        the same name (`train/loss`: the same number)."""
        if not self.trackers:
            return
        metrics = {k: float(v) for k, v in row.items() if _is_number(v) and k != "step" and k not in logged_by_trl}
        for name in self.trackers:
            if name == "tensorboard" and self._tb is not None:
                for key, value in metrics.items():
                    self._tb.add_scalar(key, value, step)
                self._tb.flush()
            elif name == "trackio":
                import trackio

                trackio.log(metrics, step=step)
            elif name == "wandb":
                import wandb

                wandb.log({**metrics, "train/global_step": step})  # TRL's step axis for W&B
            elif name == "mlflow":
                import mlflow

                mlflow.log_metrics({k: v for k, v in metrics.items() if math.isfinite(v)}, step=step)

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
            self._tb = None


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)
