"""The replay buffer's section of the run config (`buffer:`): staged injection, retirement, budget, sampling."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class BufferConfig(BaseModel):
    """Staged injection, retirement, budget and sampling of the replay buffer (`buffer:` in a run config)."""

    model_config = ConfigDict(extra="forbid")
    seed: int = Field(0, description="seed of the buffer's sampling RNG")
    target_active: int | None = Field(
        None,
        ge=1,
        description="active pool size above which variants are evicted by lowest information; "
        "None = twice the number of seeds (the paper: ~800 active from 400 seeds)",
    )
    p_max: int = Field(50, ge=0, description="expansion budget: most variants alive in active + staged (paper: 50)")
    probe_slots: int = Field(4, ge=0, description="batch slots per step given to staged variants being probed")
    max_probe_wait: int = Field(
        4,
        ge=1,
        description="steps a new variant may wait for its first probe: variants are admitted (and synthesis "
        "asked for more) only while probe_slots x max_probe_wait covers the staged backlog. Larger: more "
        "variants queued, older by the time they are probed; smaller: synthesis idles more often",
    )
    probe_obs: int = Field(
        2, ge=1, description="probes after which a staged variant that never read as boundary is retired"
    )
    mastered_streak: int = Field(
        2, ge=1, description="k: consecutive mastered observations that retire a variant / put a seed to rest"
    )
    hard_streak: int = Field(3, ge=1, description="n: consecutive hard observations that retire an active variant")
    # At paper scale (800 active, batch 32) an active task is drawn about every 25 steps.
    stale_steps: int = Field(100, ge=1, description="S: steps without an informative group that retire a variant")
    reprobe_every: int = Field(20, ge=1, description="R: steps between re-probes of a dormant (mastered) seed")
    reprobe_slots: int = Field(2, ge=0, description="batch slots per step given to dormant seeds due a re-probe")
    review: Literal["auto", "gated"] = Field(
        "auto", description="auto: new variants are probed at once; gated: they wait in staged for an approve"
    )
    synth_parents: Literal["boundary", "uniform"] = Field(
        "boundary", description="boundary_tasks() returns boundary tasks (rods) or random seeds (uniform_synth)"
    )
    injection: Literal["staged", "direct"] = Field(
        "staged",
        description="staged: a verified variant waits in staged until a probe reads boundary (the paper's staged "
        "injection); direct: it enters the active pool at once, unprobed (an ablation)",
    )
    retirement: Literal["layered", "single"] = Field(
        "layered",
        description="layered: an active variant retires after mastered_streak mastered or hard_streak hard groups, "
        "or stale_steps without an informative one (the paper's multi-layer rules); single: at its first group "
        "outside the boundary, with no streaks and no staleness timer (an ablation)",
    )
    expansion_budget: bool = Field(
        True,
        description="enforce p_max, the most variants alive in active + staged (the paper's expansion budget); "
        "false: no budget, only the probe backlog bounds admission (an ablation)",
    )
    weight_boundary: float = Field(4.0, ge=0, description="sampling weight of an active task in the boundary zone")
    weight_unseen: float = Field(2.0, ge=0, description="sampling weight of an active task never observed yet")
    weight_hard: float = Field(1.0, ge=0, description="sampling weight of an active hard task")
    weight_mastered: float = Field(0.5, ge=0, description="sampling weight of an active mastered task")

    @model_validator(mode="after")
    def _probes_possible(self) -> BufferConfig:
        if self.p_max > 0 and self.probe_slots == 0:
            raise ValueError(
                "buffer.probe_slots is 0 but buffer.p_max > 0: staged variants could never be probed; "
                "set probe_slots >= 1, or p_max: 0 to admit no variants"
            )
        if self.injection == "direct" and self.review == "gated":
            raise ValueError(
                "buffer.injection is 'direct' but buffer.review is 'gated': direct injection skips staging, where "
                "gated variants wait for an approve; set review: auto, or injection: staged"
            )
        return self
