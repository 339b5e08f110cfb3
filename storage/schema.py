"""The one list of event kinds a run logs, their columns, and the namespaced step metrics.

Every kind also carries `step` (the training step the event belongs to), `seq` (a per-run write
sequence number: the order events were appended) and `time` (UTC, filled in when absent).
A test compares what the trainer logs against this list (STYLE habit 6): add a metric here first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import pyarrow as pa

ColType = Literal["int", "float", "str", "json", "bool", "time"]

ARROW_TYPES: dict[str, pa.DataType] = {
    "int": pa.int64(),
    "float": pa.float64(),
    "str": pa.string(),
    "json": pa.string(),  # serialised with json.dumps on append; read back with json.loads
    "bool": pa.bool_(),
    "time": pa.timestamp("us", tz="UTC"),
}

COMMON_COLUMNS: dict[str, ColType] = {"step": "int", "seq": "int", "time": "time"}

# Step metrics: name -> meaning. All are floats (counts included) so a step row has one schema.
STEP_METRICS: dict[str, str] = {
    "reward/mean": "mean progress reward over the step's rollouts",
    "reward/std": "standard deviation of the progress reward over the step's rollouts",
    "reward/accuracy": "share of the step's rollouts that passed every turn",
    "train/loss": "GRPO loss",
    "train/kl": "KL divergence to the reference policy (0 when beta = 0)",
    "train/grad_norm": "gradient norm before clipping",
    "train/learning_rate": "learning rate used at this step",
    "train/tokens": "completion tokens generated in the step (model tokens only)",
    "train/rank_token_spread": "(max - min) / mean of the tokens each process generated in the step (0 with one)",
    "train/trajectories": "rollouts (episodes) in the step",
    "boundary/informative_share": "share of the step's tasks whose rewards were not all equal",
    "boundary/mastered": "tasks of the step classified mastered",
    "boundary/boundary": "tasks of the step classified boundary",
    "boundary/hard": "tasks of the step classified hard",
    "buffer/seeds": "size of the seeds pool after the step",
    "buffer/staged": "size of the staged pool after the step",
    "buffer/active": "size of the active pool after the step",
    "buffer/retired": "size of the retired pool after the step",
    "synth/queued": "synthesis jobs asked and not yet taken back (in flight; deterministic: not yet due)",
    "synth/accepted": "variants accepted during the step",
    "synth/rejected": "variants rejected during the step",
    "synth/refused": "boundary parents not handed to synthesis at the step: the queue was full, or the leak "
    "guard refused the parent",
    "time/rollout_s": "seconds in the rollout function: draw, generation, tool calls, turn checks, chat rendering",
    "time/gen_s": "seconds the generation backend spent producing the step's assistant messages",
    "time/env_s": "seconds in the environments' step and finish: tool calls, and BFCL's per-turn checks as turns end",
    "time/reward_s": "seconds in the environments' score of finished episodes (the reward itself)",
    "time/render_s": "seconds of the rollout outside the three above: chat-template rendering, tokenizing, parsing",
    "time/gather_s": "seconds gathering the reward matrix from every process (0 with one process)",
    "time/update_s": "seconds from the end of the rollouts to the optimizer step: TRL's batching, advantages, "
    "forward, backward and gradient clipping (with several processes: the gradient all-reduce too)",
    "time/optimizer_s": "seconds in the optimizer step (AdamW)",
    "time/curriculum_s": "seconds in the RODS hooks: detector, buffer, synthesis hand-off, decisions, digest",
    "time/store_s": "seconds writing the step's events (the step row itself is written after this is measured)",
    "time/step_s": "seconds from the step's start to the end of its event writes (evaluation excluded)",
}


# Step metrics only a run whose rollouts vLLM generates logs: TRL's importance-sampling correction, which weighs each
# model token by the trainer's probability over vLLM's (configs/paper-qwen3-4b.yaml says which mode and why).
VLLM_STEP_METRICS: dict[str, str] = {
    "sampling/importance_sampling_ratio/min": "smallest importance-sampling ratio of the step (after TRL's cap or mask)",
    "sampling/importance_sampling_ratio/mean": "mean importance-sampling ratio over the step's model tokens (token "
    "modes) or episodes (sequence modes); 0 marks masked ones",
    "sampling/importance_sampling_ratio/max": "largest importance-sampling ratio of the step (after TRL's cap or mask)",
    "sampling/sampling_logp_difference/mean": "mean |trainer log-prob - vLLM log-prob| over the step's model tokens",
    "sampling/sampling_logp_difference/max": "largest |trainer log-prob - vLLM log-prob| over the step's model tokens",
}


@dataclass(frozen=True)
class EventKind:
    name: str
    doc: str
    columns: dict[str, ColType]

    def all_columns(self) -> dict[str, ColType]:
        return {**COMMON_COLUMNS, **self.columns}

    def arrow_schema(self) -> pa.Schema:
        return pa.schema([pa.field(c, ARROW_TYPES[t]) for c, t in self.all_columns().items()])


_KINDS = [
    EventKind(
        "step",
        "one row per training step: the metrics above",
        {"wall_s": "float", **dict.fromkeys({**STEP_METRICS, **VLLM_STEP_METRICS}, "float")},
    ),
    EventKind(
        "task_stats",
        "per task per generation step: reward statistics and region",
        {
            "task_id": "str",
            "n": "int",
            "mean": "float",
            "var": "float",
            "smoothed_mean": "float",
            "smoothed_var": "float",
            "region": "str",
        },
    ),
    EventKind(
        "rollouts",
        "optional: one row per rollout",
        {"task_id": "str", "sample": "int", "reward": "float", "accuracy": "float", "n_calls": "int"},
    ),
    EventKind("region_change", "a task moved between regions", {"task_id": "str", "old": "str", "new": "str"}),
    EventKind(
        "boundary_sample", "a boundary task queued for synthesis", {"task_id": "str", "mean": "float", "var": "float"}
    ),
    EventKind(
        "variant",
        "a synthesized variant with lineage and every stage's outcome",
        {
            "variant_id": "str",
            "parent_id": "str",
            "accepted": "bool",
            "stages": "json",
            "reason": "str",
            "task": "json",
            "distance": "int",
        },
    ),
    EventKind(
        "buffer",
        "a task moved between pools (from_pool null: entered the buffer); reason is the code "
        "(rods_core.reasons.REASONS), detail the figures behind it",
        {"task_id": "str", "from_pool": "str", "to_pool": "str", "reason": "str", "detail": "str"},
    ),
    EventKind(
        "eval",
        "an evaluation on a split: accuracy and progress over its `tasks` held-out tasks, the progress reward's "
        "sample standard deviation across them (null with one task), each task's progress (`per_task`: id -> "
        "progress, for analyses by task); the last three null in logs written before they were",
        {
            "split": "str",
            "accuracy": "float",
            "progress": "float",
            "per_category": "json",
            "trajectories": "int",
            "tasks": "int",
            "progress_sd": "float",
            "per_task": "json",
        },
    ),
    EventKind("checkpoint", "a checkpoint was saved", {"path": "str"}),
    EventKind(
        "state_digest",
        "per process per step: a hash of the buffer + detector state (every rank must agree)",
        {"rank": "int", "digest": "str"},
    ),
    EventKind(
        "decision_applied",
        "a curation decision reached the trainer",
        {"decision_id": "int", "outcome": "str", "reason": "str"},
    ),
]

EVENT_KINDS: dict[str, EventKind] = {k.name: k for k in _KINDS}
POOLS: tuple[str, ...] = ("seeds", "staged", "active", "retired")
REGIONS: tuple[str, ...] = ("mastered", "boundary", "hard")
