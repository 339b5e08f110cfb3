"""Runs GRPO with TRL's colocated vLLM on the tiny model in its own process and writes what happened as JSON.

tests/test_vllm.py runs it once per module (one engine load, ~40-90 s on CPU): vLLM starts its engine when
the trainer is built, so the work sits under `__main__`. At each step's rollout (after the weight sync) it
records the log-probs vLLM and the training model give one fixed token sequence, and after training it plays
episodes through vLLM to check the multi-turn token layout.
Usage: python tests/vllm_driver.py OUT.json WORK_DIR [lora]   (lora: train a LoRA adapter, model.lora)
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB of KV cache: the tiny model needs little

ROOT = Path(__file__).resolve().parent.parent
FIXED_LEN, PROMPT_LEN = 48, 24  # the fixed sequence, and how much of it is prompt


def length_reward(prompts, completions, completion_ids, **kwargs):
    # A reward with variance, so the untrained model's GRPO step has advantages to follow (all progress is 0).
    return [len(c) / 1000.0 for c in completion_ids]


def vllm_logprobs(llm, ids: list[int]) -> list[float]:
    """vLLM's log-probs of ids[PROMPT_LEN:] given what precedes each token (temperature 1)."""
    from vllm import SamplingParams

    out = llm.generate([{"prompt_token_ids": ids}], SamplingParams(max_tokens=1, prompt_logprobs=0), use_tqdm=False)
    return [d[t].logprob for d, t in zip(out[0].prompt_logprobs[PROMPT_LEN:], ids[PROMPT_LEN:], strict=True)]


def model_logprobs(model, ids: list[int]) -> list[float]:
    import torch

    was_training = model.training
    model.eval()  # a trainer leaves its model in training mode: a LoRA adapter's dropout would be on
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0, PROMPT_LEN - 1 : -1].float()
    model.train(was_training)
    lp = torch.log_softmax(logits, dim=-1).gather(-1, torch.tensor(ids[PROMPT_LEN:]).unsqueeze(-1)).squeeze(-1)
    return lp.tolist()


def main(out_path: Path, work: Path, lora: bool = False) -> None:
    import torch

    from rods_core.benchmarks.bfcl.demo import demo_seeds
    from rods_core.config import EpisodeConfig, RunConfig, TinyModelConfig
    from rods_core.policy.generation import VLLMGenerator
    from rods_core.policy.tiny import init_tiny, load_policy
    from rods_core.rollout import episode_benchmark, rollout_output, run_episodes
    from rods_core.trainer import RodsGRPOTrainer
    from tests.app_helpers import smoke_config

    torch.set_num_threads(1)
    model_dir = work / "model"
    init_tiny(TinyModelConfig(hidden=64, layers=2, heads=2, kv_heads=1, ffn=128, vocab=1000), model_dir)
    overrides = {"grpo.max_steps": 2, "grpo.num_generations": 3, "grpo.use_vllm": True, "grpo.learning_rate": 1e-2}
    if lora:  # a LoRA adapter through TRL's peft_config: vLLM receives the merged weights
        overrides["model.lora"] = {"r": 4, "alpha": 8}
    cfg = RunConfig.model_validate(smoke_config(work, model_dir, **overrides))
    tasks = {t.id: t for t in demo_seeds()[:4]}
    ids = list(tasks)
    model, tokenizer, prompt = load_policy(model_dir)
    episode_cfg = EpisodeConfig(
        prompt=prompt,
        max_steps_per_turn=2,
        max_context_tokens=1024,
        sampling={"temperature": 1.0, "max_new_tokens": 16},
    )
    fixed = torch.randint(3, 1000, (FIXED_LEN,), generator=torch.Generator().manual_seed(0)).tolist()
    result: dict = {"steps": []}
    trainer = None

    def on_rollout(report) -> None:
        # called inside the rollout, after this step's weights reached vLLM
        m = trainer.accelerator.unwrap_model(trainer.model)
        result["steps"].append(
            {
                "global_step": trainer.state.global_step,
                "vllm": vllm_logprobs(trainer.vllm_generation.llm, fixed),
                "trainer": model_logprobs(m, fixed),
                "model_tokens": report.model_tokens,
                "groups": [[tid, len(r)] for tid, r in report.groups],
                "gen_s": report.timings["time/gen_s"],
            }
        )

    trainer = RodsGRPOTrainer(
        model=model,
        tokenizer=tokenizer,
        cfg=cfg,
        out_dir=str(work / "ck"),
        draw=lambda n: [ids[i % len(ids)] for i in range(n)],
        task_of=tasks.__getitem__,
        on_rollout=on_rollout,
        episode_cfg=episode_cfg,
        reward_funcs=[length_reward],
        benchmark=episode_benchmark(episode_cfg, "bfcl_multi_turn"),
    )
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    import rods_core.trainer as trainer_module

    gathers = []  # entries into whole_weights: none while vLLM plays the rollouts
    whole = trainer_module.whole_weights
    trainer_module.whole_weights = lambda *a, **k: (gathers.append(1), whole(*a, **k))[1]
    trainer.train()
    trainer_module.whole_weights = whole
    result["whole_weights_entered"] = len(gathers)
    # the held-out evaluation's generator at the end of training: the run's engine, synced to the final weights
    with trainer.evaluation_generator() as gen:
        result["eval_generator"] = type(gen).__name__
        result["eval_logprobs_asked"] = gen.want_logprobs
        result["eval_vllm"] = vllm_logprobs(trainer.vllm_generation.llm, fixed)
        result["eval_trainer"] = model_logprobs(trainer.accelerator.unwrap_model(trainer.model), fixed)
    result["generator"] = type(trainer._generator).__name__
    result["generated_tokens"] = trainer._generator.stats.tokens
    result["weights_changed"] = any(not torch.equal(v, before[k]) for k, v in trainer.model.state_dict().items())
    result["losses"] = [h["loss"] for h in trainer.state.log_history if "loss" in h]

    episodes = run_episodes(
        [tasks[i] for i in ids],
        VLLMGenerator.from_trainer(trainer),
        episode_cfg,
        benchmark=episode_benchmark(episode_cfg, "bfcl_multi_turn"),
    )
    out = rollout_output(episodes)
    result["episodes"] = {
        "completion_ids": out["completion_ids"],
        "env_mask": out["env_mask"],
        "logprobs": out["logprobs"],
        "n_messages": [e.n_messages for e in episodes],
        "stop_id": tokenizer.eos_token_id,
        "max_new_tokens": episode_cfg.sampling.max_new_tokens,
    }
    out_path.write_text(json.dumps(result))


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main(Path(sys.argv[1]), Path(sys.argv[2]), lora=sys.argv[3:] == ["lora"])
