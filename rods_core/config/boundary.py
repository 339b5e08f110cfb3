"""The boundary detector's section of the run config (`boundary:`): thresholds of the regions and the smoothing."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator


class BoundaryConfig(BaseModel):
    """Thresholds of the regions and the smoothing of per-task statistics (`boundary:` in a run config)."""

    model_config = ConfigDict(extra="forbid")
    mastered_mean: float = Field(
        0.8, gt=0.0, le=1.0, description="a task whose smoothed mean reward is >= this is mastered"
    )
    hard_mean: float = Field(0.2, ge=0.0, lt=1.0, description="a task whose smoothed mean reward is <= this is hard")
    min_variance_share: float = Field(
        0.01,
        ge=0.0,
        le=1.0,
        description="smoothed variance / 0.25 below this counts as flat (no gradient): a flat task between "
        "the thresholds is hard (it fails the same part every time); also the floor for an 'informative' group",
    )
    ema_alpha: float = Field(
        0.5, gt=0.0, le=1.0, description="weight of the newest group in the smoothed mean/variance; 1 = last group only"
    )

    @model_validator(mode="after")
    def _ordered(self) -> BoundaryConfig:
        if self.hard_mean >= self.mastered_mean:
            raise ValueError(
                f"boundary.hard_mean ({self.hard_mean}) must be below boundary.mastered_mean "
                f"({self.mastered_mean}); otherwise no task can be in the boundary zone"
            )
        return self
