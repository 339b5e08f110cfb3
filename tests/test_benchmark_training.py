"""A third benchmark, written here in a few lines of the protocols, trains with GRPO through the same trainer:
its environment plays the episodes and its score is the reward GRPO learns from."""

from __future__ import annotations

import torch
from pydantic import BaseModel

from rods_core.benchmarks.protocols import EpisodeScore, Step, scripted_policy, verify_with
from rods_core.config import EpisodeConfig, RunConfig
from rods_core.policy.tiny import load_policy
from rods_core.tasks import Provenance
from rods_core.trainer import RodsGRPOTrainer
from tests.conftest import smoke_config


class WordTask(BaseModel):
    """Say a given word; the reward grows with the reply's length (a signal with variance even for an
    untrained model), accuracy needs the word itself."""

    id: str
    word: str
    provenance: Provenance = Provenance()

    def content_key(self) -> str:
        return self.word

    def to_record(self) -> dict:
        return self.model_dump(mode="json")


class WordEnv:
    def __init__(self, task: WordTask):
        self.task, self.reply = task, ""

    def tools(self):
        return []

    def reset(self):
        return [{"role": "user", "content": f"Say {self.task.word}."}]

    def step(self, message):
        self.reply = message.get("content") or ""
        return Step([], True)

    def finish(self):
        pass

    def score(self):
        return EpisodeScore(min(1.0, len(self.reply) / 400), self.task.word in self.reply)


class Words:
    name, task_type, synthesizer = "words", WordTask, None
    WORDS = ("apple", "river", "stone", "cloud", "ember", "maple")

    def seeds(self, split):
        every = [WordTask(id=f"word_{i}", word=w) for i, w in enumerate(self.WORDS)]
        return [t for i, t in enumerate(every) if split == "all" or (i >= 4) == (split == "test")]

    def leak_reason(self, task):
        return "a held-out word" if task.word in self.WORDS[4:] else None

    def environment(self, task, workdir):
        return WordEnv(task)

    def reference_policy(self, task):
        return scripted_policy([{"role": "assistant", "content": task.word}])

    def verify(self, task, workdir):
        return verify_with(self, task, workdir)

    def render(self, task):
        return f"**{task.id}**: say {task.word}"

    def group_of(self, task):
        return "all"


def test_grpo_trains_two_steps_on_a_benchmark_defined_in_a_test(tmp_path, tiny_model_dir):
    bench = Words()
    cfg = RunConfig.model_validate(
        smoke_config(tmp_path, tiny_model_dir, **{"grpo.max_steps": 2, "grpo.num_generations": 3})
    )
    tasks = {t.id: t for t in bench.seeds("train")}
    ids, seen = list(tasks), []
    model, tokenizer, prompt = load_policy(tiny_model_dir)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    trainer = RodsGRPOTrainer(
        model=model,
        tokenizer=tokenizer,
        cfg=cfg,
        out_dir=str(tmp_path / "ck"),
        draw=lambda n: [ids[i % len(ids)] for i in range(n)],
        task_of=tasks.__getitem__,
        on_rollout=seen.append,
        episode_cfg=EpisodeConfig(prompt=prompt, sampling={"temperature": 1.0, "max_new_tokens": 24}),
        benchmark=bench,
    )
    trainer.train()
    assert len(seen) == 2
    rewards = [r for report in seen for _, group in report.groups for r in group]
    # The rewards are the benchmark's score (replies of up to 24 tokens: below 1), and they
    # differ within groups, so GRPO had advantages to learn from.
    assert all(0.0 <= r < 1.0 for r in rewards) and len(set(rewards)) > 1
    assert {tid for report in seen for tid, _ in report.groups} <= set(ids)
    changed = [k for k, v in trainer.model.state_dict().items() if not torch.equal(v, before[k])]
    assert changed and all(torch.isfinite(v).all() for v in trainer.model.state_dict().values())
