"""Synthesis's section of the run config (`synth:`): backend, endpoint, distance and the worker."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rods_core.prompt_files import Prompts


class SynthConfig(BaseModel):
    """How variants are synthesized; YAML run configs hold one of these under `synth:`."""

    model_config = ConfigDict(extra="forbid")
    backend: Literal["template", "llm"] = Field(
        "template", description="rewrite backend: 'template' (tool docs / parent wording, no LLM) or 'llm'"
    )
    endpoint_url: str | None = Field(
        None, description="OpenAI-compatible base URL for the llm backend and critic, e.g. http://127.0.0.1:8000/v1"
    )
    endpoint_model: str | None = Field(None, description="model name sent to the endpoint")
    api_key_env: str | None = Field(
        None, description="NAME of the environment variable holding the endpoint's API key (the key is never stored)"
    )
    n_per_parent: int = Field(4, ge=1, le=100, description="accepted variants wanted per parent task")
    max_attempts: int = Field(24, ge=1, le=1000, description="candidates tried per parent before giving up")
    seed: int = Field(0, description="seed of every random choice; same seed + parent = same variants")
    distance: float = Field(
        0.85,
        ge=0.0,
        le=1.0,
        description="how far a variant moves from its parent: each value the user states is drawn anew with "
        "this probability (one always is), and compose_share / swap_prob are scaled by it. 0 = near (one value "
        "changed, the parent's wording); 1 = far (every stated value, composed turns for compose_share of "
        "candidates). A variant records its distance, changed values + swapped calls + composed turns, in its "
        "provenance note ('distance=N'; the state perturbation of perturb_config is not counted)",
    )
    compose_share: float = Field(
        0.3,
        ge=0.0,
        le=1.0,
        description="at distance 1, share of candidates whose turns are composed from the tool docs "
        "(the rest keep the parent's wording with new values; template backend)",
    )
    compose_fallback: bool = Field(
        True,
        description="when the parent's words state no value that can change, compose that candidate's turns "
        "from the tool docs instead of giving up (template backend; also at distance 0)",
    )
    swap_prob: float = Field(
        0.35,
        ge=0.0,
        le=1.0,
        description="at distance 1, chance to swap a call for a same-skill function (composed turns)",
    )
    perturb_config: bool = Field(
        True,
        description="perturb the initial state: Augment renames files no call uses, adds a distractor file, "
        "raises unstated balances; Plan gives a used folder an empty sibling as a destination to draw",
    )
    long_context_distractors: int = Field(
        0, ge=0, le=200, description="distractor files added to long_context variants"
    )
    llm_critic: bool = Field(False, description="also ask the endpoint to judge each variant (off by default)")
    llm_timeout_s: float = Field(
        60.0, gt=0, le=3600, description="seconds one endpoint request may take to connect, and between bytes"
    )
    llm_max_retries: int = Field(
        2,
        ge=0,
        le=10,
        description="retries of an endpoint request that could not connect, timed out or got HTTP 408/409/429/5xx "
        "(exponential backoff from 0.5 s to 8 s)",
    )
    llm_max_tokens: int = Field(1024, ge=16, le=32_768, description="most tokens of one endpoint answer")
    llm_temperature: float = Field(0.7, ge=0.0, le=2.0, description="sampling temperature of endpoint answers")
    prompts_dir: str | None = Field(
        None,
        description="folder of prompt files overriding the built-in ones (rods_core/synth/prompts): "
        "rewrite_system.md, rewrite_user.md, critique_system.md, critique_user.md; each file present replaces one",
    )
    queue_size: int = Field(32, ge=1, le=10_000, description="SynthWorker: parents waiting or in flight at most")
    worker: Literal["thread", "process"] = Field(
        "thread", description="SynthWorker: run beside training in a thread or a process"
    )

    @model_validator(mode="after")
    def _endpoint_when_needed(self) -> SynthConfig:
        if (self.backend == "llm" or self.llm_critic) and not (self.endpoint_url and self.endpoint_model):
            raise ValueError(
                "backend='llm' and llm_critic need endpoint_url and endpoint_model; set both or use backend='template'"
            )
        if self.prompts_dir is not None:
            Prompts(self.prompts_dir)  # a missing folder or a broken prompt file fails here, naming the file
        return self
