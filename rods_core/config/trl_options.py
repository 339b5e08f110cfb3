"""Which of TRL's GRPOConfig fields a run config may pass through (`grpo.trainer_args`), checked without
importing TRL: the field names are read from the installed TRL and transformers sources with `ast`.

Importing trl costs seconds, and the config is validated by commands that never train (`rods config
validate`, the app's launch form); tests/test_trl_options.py checks the names read here against
`dataclasses.fields(trl.GRPOConfig)`.
"""

from __future__ import annotations

import ast
import difflib
import importlib.util
from functools import lru_cache
from pathlib import Path

# GRPOConfig's class chain, base last: (package, file in it, class)
_CLASS_CHAIN = (
    ("trl", "trainer/grpo_config.py", "GRPOConfig"),
    ("trl", "trainer/base_config.py", "_BaseConfig"),
    ("transformers", "training_args.py", "TrainingArguments"),
)

# Fields the run config sets from its own fields (or that RODS fixes): passing them through would fight the
# run's own settings. Each maps to the reason, naming the config field to use instead.
OWNED: dict[str, str] = {
    "output_dir": "the run folder holds the checkpoints; set output_dir (top level)",
    "run_name": "the tracker's run name is the run's name; set name (top level)",
    "report_to": "set report.to",
    "project": "set report.project",
    "seed": "set seed (top level)",
    "num_generations": "set grpo.num_generations",
    "per_device_train_batch_size": "derived from grpo.tasks_per_step, grpo.num_generations and grpo.micro_batch",
    "gradient_accumulation_steps": "derived from grpo.tasks_per_step, grpo.num_generations and grpo.micro_batch",
    "steps_per_generation": "one generation batch per optimizer step: set grpo.tasks_per_step and grpo.micro_batch",
    "generation_batch_size": "one generation batch per optimizer step: set grpo.tasks_per_step",
    "num_iterations": "set grpo.num_iterations",
    "max_steps": "set grpo.max_steps",
    "num_train_epochs": "runs are measured in steps: set grpo.max_steps",
    "learning_rate": "set grpo.learning_rate",
    "beta": "set grpo.beta",
    "epsilon": "set grpo.epsilon",
    "loss_type": "set grpo.loss_type",
    "max_grad_norm": "set grpo.max_grad_norm",
    "max_completion_length": "a multi-turn episode's length: set episode.max_context_tokens",
    "temperature": "set episode.sampling.temperature",
    "use_vllm": "set grpo.use_vllm",
    "vllm_mode": "set grpo.vllm_mode",
    "bf16": "set grpo.bf16",
    "gradient_checkpointing": "set grpo.gradient_checkpointing",
    "activation_checkpointing": "set grpo.gradient_checkpointing",  # its new name (transformers >= 5.2x)
    "use_cpu": "set grpo.use_cpu",
    "save_strategy": "RODS saves its curriculum beside every checkpoint: set grpo.save_steps",
    "save_steps": "set grpo.save_steps",
    "save_total_limit": "set grpo.save_total_limit",
    "logging_steps": "the run writes one step row per optimizer step",
    "shuffle_dataset": "the dataset is RODS's slots, bound in order to the drawn tasks",
    "dataloader_num_workers": "the slots are drawn in the training process",
    "disable_tqdm": "the run prints its own step line",
    "ddp_find_unused_parameters": "fixed for the multi-turn update",
    "ddp_broadcast_buffers": "fixed: ranks make different numbers of forward calls",
    "resume_from_checkpoint": "use `rods train --resume <run id>` (the curriculum resumes with the weights)",
    "vllm_server_base_url": "set grpo.vllm_server_url",
    "vllm_max_model_length": "an episode ends before its context passes episode.max_context_tokens: set that",
    # rollouts sample from episode.sampling (rods_core.policy.generation), never from TRL's generation settings
    "top_p": "rollouts sample from episode.sampling: set episode.sampling.top_p",
    "top_k": "rollouts sample from episode.sampling (temperature, top_p, max_new_tokens); top_k is not offered",
    "min_p": "rollouts sample from episode.sampling (temperature, top_p, max_new_tokens); min_p is not offered",
    "repetition_penalty": "rollouts sample from episode.sampling (temperature, top_p, max_new_tokens); "
    "a repetition penalty is not offered",
    "generation_kwargs": "rollouts sample from episode.sampling, which TRL's generation_kwargs never reach",
}

# Fields GRPOConfig accepts that break multi-turn rollouts at some values: (the value is refused when, why).
# Both are TRL colocate-mode features; RODS's episodes call the engine a different number of times on each
# process, outside TRL's own generate (rods_core.policy.generation.VLLMGenerator).
REFUSED_VALUES: dict[str, tuple] = {
    "vllm_enable_sleep_mode": (
        bool,
        "sleep mode discards vLLM's weights after each of TRL's own generate calls and re-syncs them only in the "
        "next one, which multi-turn episodes never make (they call the engine directly, many times a step); "
        "remove it, or lower trainer_args.vllm_gpu_memory_utilization to leave the training state room",
    ),
    "vllm_tensor_parallel_size": (
        lambda v: not isinstance(v, int) or v > 1,
        "a tensor-parallel colocated engine spans several training processes, each of which must call it "
        "together, while each process's episodes call it a different number of times (a hang); keep 1, or use "
        "grpo.vllm_mode: server with `trl vllm-serve --tensor_parallel_size N` on the generation GPUs",
    ),
}


@lru_cache(maxsize=1)
def grpo_config_fields() -> frozenset[str]:
    """The init fields of the installed trl.GRPOConfig (its own and inherited), read from the sources."""
    names: set[str] = set()
    for package, file, cls in _CLASS_CHAIN:
        spec = importlib.util.find_spec(package)  # a top-level package: found without importing it
        if spec is None or not spec.submodule_search_locations:
            raise RuntimeError(f"{package} is not installed: grpo.trainer_args cannot be checked")
        source = Path(next(iter(spec.submodule_search_locations))) / file
        names |= _dataclass_init_fields(ast.parse(source.read_text(encoding="utf-8")), cls, source)
    return frozenset(names)


def _dataclass_init_fields(tree: ast.Module, cls: str, source: Path) -> set[str]:
    node = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls), None)
    if node is None:
        raise RuntimeError(f"{source}: class {cls} not found: grpo.trainer_args cannot be checked")
    out = set()
    for item in node.body:
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and not _init_false(item.value):
            out.add(item.target.id)
    return out


def _init_false(value: ast.expr | None) -> bool:
    return isinstance(value, ast.Call) and any(
        k.arg == "init" and isinstance(k.value, ast.Constant) and k.value.value is False for k in value.keywords
    )


def trainer_args_problems(args: dict, known: frozenset[str] | None = None) -> list[str]:
    """Why each key of `grpo.trainer_args` cannot be passed to GRPOConfig (empty when all can): a field RODS
    sets itself (with the config field to use), a value that breaks multi-turn rollouts (with the reason),
    or no GRPOConfig field (with the nearest name)."""
    known = grpo_config_fields() if known is None else known
    problems = []
    for key, value in args.items():
        if key in OWNED:
            problems.append(f"{key}: set by RODS, not passed through ({OWNED[key]})")
        elif key in REFUSED_VALUES and REFUSED_VALUES[key][0](value):
            problems.append(f"{key}: {value!r} is refused: {REFUSED_VALUES[key][1]}")
        elif key not in known:
            near = difflib.get_close_matches(key, sorted(known), n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            problems.append(f"{key}: not a field of TRL's GRPOConfig{hint}")
    return problems
