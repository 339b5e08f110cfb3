"""bench.step_replay reruns a recorded update offline: from checkpoint N-1 and step N's recorded batch, the replay of
the whole batch lands on the run's own checkpoint N, so what it says of other subsets is the run's update too."""

from __future__ import annotations

from rods_core.benchmarks.bfcl.demo import demo_seeds
from rods_core.config import EpisodeConfig, RunConfig, dump_config
from rods_core.policy.tiny import load_policy
from rods_core.rollout import episode_benchmark
from rods_core.trainer import RodsGRPOTrainer
from tests.conftest import smoke_config
from tests.test_trainer import _length_reward


def test_the_whole_batch_replayed_from_checkpoint_one_lands_on_checkpoint_two(tmp_path, tiny_model_dir):
    from bench.step_replay import Replayer, group_rows

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    raw = smoke_config(tmp_path, tiny_model_dir, **{"grpo.max_steps": 2, "grpo.num_generations": 3,
                                                    "grpo.save_steps": 1, "report.batch_record": True})  # fmt: skip
    cfg = RunConfig.model_validate(raw)
    (run_dir / "config.yaml").write_text(dump_config(cfg))
    tasks = {t.id: t for t in demo_seeds()[:4]}
    ids = list(tasks)
    model, tokenizer, prompt = load_policy(tiny_model_dir)
    episode = EpisodeConfig(prompt=prompt, max_steps_per_turn=1, max_context_tokens=1024,
                            sampling={"temperature": 1.0, "max_new_tokens": 16})  # fmt: skip
    trainer = RodsGRPOTrainer(
        model=model, tokenizer=tokenizer, cfg=cfg, out_dir=str(run_dir / "checkpoints"), draw=lambda n: ids[:n],
        task_of=tasks.__getitem__, on_rollout=lambda r: None, episode_cfg=episode, reward_funcs=[_length_reward],
        record_dir=run_dir, benchmark=episode_benchmark(episode, "bfcl_multi_turn"),
    )  # fmt: skip
    trainer.train()
    assert sorted(p.name for p in (run_dir / "batches").iterdir()) == ["step-1-rank0.pt", "step-2-rank0.pt"]

    rp = Replayer(run_dir, 2)
    groups = group_rows(rp.batch, 3)
    assert [t for t, _ in groups] == ids[:2] and rp.batch.tensors["advantages"].abs().sum() > 0
    rp.update(list(range(6)))
    assert rp.mismatch_with_next_checkpoint() < 1e-6  # the replay is the run's update
    adv = rp.batch.tensors["advantages"]
    informative = next(rows for _, rows in groups if adv[rows].abs().sum() > 0)
    rp.update([i for i in range(6) if i not in informative])  # without it, the update lands elsewhere
    assert rp.mismatch_with_next_checkpoint() > 1e-5
