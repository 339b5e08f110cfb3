"""Synthesis's section of the run config (`synthesis:`): how the loop feeds the worker, and the pipeline's
backend, endpoint and distance, in one section. A config with the pipeline's former section name (`synth:`,
`--set synth.x`) still loads, read as `synthesis:`, with a note that names the file and the new key."""

from __future__ import annotations

import warnings
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rods_core.config.prompt_files import Prompts


class SynthesisConfig(BaseModel):
    """How variants are synthesized and fed to the loop; YAML run configs hold one of these under `synthesis:`."""

    model_config = ConfigDict(extra="forbid")
    parents_per_step: int = Field(
        2,
        ge=0,
        description="boundary tasks handed to synthesis after each step, at most (fewer when the buffer "
        "could not admit their variants: see buffer.max_probe_wait)",
    )
    deterministic: bool = Field(
        False,
        description="apply the variants synthesized for step k's parents at step k + apply_after, waiting for "
        "the worker when it is late, so a run repeats exactly whatever the machine's load (docs/experiments/"
        "determinism.md says what else varies); false = take whatever the worker has finished at each step, "
        "never waiting (training never blocks, but what lands when depends on load). `rods bench` sets true",
    )
    apply_after: int = Field(
        1,
        ge=0,
        le=100,
        description="with deterministic: steps between asking for variants and applying them (0 = wait at once); "
        "the worker has this many steps of training to finish before a step waits for it",
    )
    exclude: list[str] = Field(
        default_factory=list,
        description="JSONL task files no training task may equal by content (an experiment's held-out sets): a "
        "synthesized variant equal to one is rejected as it arrives, its reason naming the held-out set, so the "
        "report counts the collisions",
    )
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
        description="folder of prompt files overriding the built-in ones (rods_core/benchmarks/bfcl/synth/prompts): "
        "rewrite_system.md, rewrite_user.md, critique_system.md, critique_user.md; each file present replaces one",
    )
    queue_size: int = Field(32, ge=1, le=10_000, description="SynthWorker: parents waiting or in flight at most")
    worker: Literal["thread", "process"] = Field(
        "thread", description="SynthWorker: run beside training in a thread or a process"
    )

    @model_validator(mode="after")
    def _endpoint_when_needed(self) -> SynthesisConfig:
        if (self.backend == "llm" or self.llm_critic) and not (self.endpoint_url and self.endpoint_model):
            raise ValueError(
                "backend='llm' and llm_critic need endpoint_url and endpoint_model; set both or use backend='template'"
            )
        if self.prompts_dir is not None:
            Prompts(self.prompts_dir)  # a missing folder or a broken prompt file fails here, naming the file
        return self


# ----- the renamed section ------------------------------------------------------------------------------
RENAMED_SECTIONS = {"synth": "synthesis"}  # old section -> the section its fields now live in


class ConfigRenamedWarning(UserWarning):
    """A config used a section's old name; it loaded, read under the new name."""


def renamed_sections(data: dict[str, Any], where: str = "config") -> dict[str, Any]:
    """`data` with each renamed section's fields moved into its new section (a warning naming `where`, the old
    and the new key); ValueError when both set one field to different values, or the old one is not a mapping."""
    out = dict(data)
    for old, new in RENAMED_SECTIONS.items():
        if old not in out:
            continue
        moved, kept = out.pop(old), out.get(new)
        kept = {} if kept is None else kept
        if not isinstance(moved, dict) or not isinstance(kept, dict):
            raise ValueError(f"{where}: {old}: and {new}: must be mappings of fields ({old}: is now {new}:)")
        clash = sorted(k for k in moved.keys() & kept.keys() if moved[k] != kept[k])
        if clash:
            raise ValueError(
                f"{where}: {old}.{clash[0]} and {new}.{clash[0]} are both set and differ; `{old}:` was renamed "
                f"`{new}:`: keep {new}.{clash[0]} only"
            )
        out[new] = {**kept, **moved}
        fields = ", ".join(f"{new}.{k}" for k in moved) or new
        warnings.warn(
            f"{where}: section `{old}:` was renamed `{new}:`; read as {fields}. Rename the key in the file",
            ConfigRenamedWarning,
            stacklevel=2,
        )
    return out


def renamed_key(key: str, where: str = "--set") -> str:
    """A dotted override key with a renamed section's old name (`synth.seed`) as its new one (`synthesis.seed`),
    with a warning naming `where`; other keys unchanged."""
    head, dot, rest = key.partition(".")
    if head not in RENAMED_SECTIONS:
        return key
    new = RENAMED_SECTIONS[head] + dot + rest
    warnings.warn(f"{where}: {key} was renamed {new}; read as {new}", ConfigRenamedWarning, stacklevel=2)
    return new
