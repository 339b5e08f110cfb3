"""The reporting section of the run config (`report:`): which trackers receive the run's logs."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Tracker = Literal["trackio", "tensorboard", "wandb", "mlflow", "none"]


class ReportSettings(BaseModel):
    """Where the run is reported besides its own event log."""

    model_config = ConfigDict(extra="forbid")
    to: list[Tracker] = Field(
        default_factory=lambda: ["none"],
        min_length=1,
        description="trackers that receive TRL's logs and every step row (TRL's report_to): trackio, tensorboard "
        "(files in <run folder>/tensorboard), wandb, mlflow, or none; each needs its package installed",
    )
    project: str = Field("rods", min_length=1, description="the tracker's project (trackio, wandb) or experiment "
                         "(mlflow) the run is filed under")  # fmt: skip
    wandb_mode: Literal["configured", "online", "offline", "disabled"] = Field(
        "configured",
        description="W&B's mode (WANDB_MODE) for this run: configured = as W&B is set up on the host (WANDB_MODE "
        "when set, else online, which needs `wandb login`); offline writes the run to ./wandb for a later "
        "`wandb sync`",
    )
    batch_record: bool = Field(
        False,
        description="write each step's generation batch (token ids, masks, advantages, task ids and rewards) to "
        "<run folder>/batches/ so an update can be replayed offline (`python -m bench.step_replay`); about 1 MB a "
        "step on the demo, far more on long episodes",
    )

    @model_validator(mode="after")
    def _check(self) -> ReportSettings:
        if "none" in self.to and len(self.to) > 1:
            raise ValueError(f"report.to {self.to}: 'none' cannot be combined with a tracker; drop 'none'")
        return self

    @property
    def trackers(self) -> list[str]:
        return [t for t in self.to if t != "none"]

    def report_to(self) -> list[str] | str:
        """TRL's `report_to` value."""
        return self.trackers or "none"
