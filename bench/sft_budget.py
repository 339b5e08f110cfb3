"""The rule that picks the demo warm start's budget from snapshots of one SFT run (bench/sft_budget_bench.py):
the smallest budget whose quality is not lower than the full budget's beyond noise, at it and every larger
budget scored.

A budget passes when, against the full build on the same tasks:
- every per-task figure (greedy progress, accuracy and format validity on the demo seeds and on held-out
  variants) is not lower beyond noise: the paired bootstrap 95% interval of (budget - full) over tasks
  reaches 0 or above;
- the share of seeds whose 8 sampled rewards differ (no per-task detail) is at least the lower end of the full
  build's Wilson 95% interval;
- the warm start's own targets hold: format validity >= 0.9, greedy progress > 0.3, share differing >= 0.5.
These are SFT-side figures only. A budget that passes them counts as good as the shipped warm start only when
`rods bench demo` also says the demo holds on its model: a warm start that passed them started GRPO weaker, and
the demo's rods arm collapsed on it (docs/experiments/demo-collapse.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rods_core.statistics import bootstrap_indices, quantile_interval, wilson

BOOTS = 4000
TARGETS = {"seeds/format_valid": 0.9, "seeds/progress": 0.3, "sampled/share_differing": 0.5}
PAIRED = ("progress", "accuracy", "format_valid")  # per-task figures, on each task set
SETS = ("seeds", "heldout")


@dataclass(frozen=True)
class Scored:
    """One budget's scores: per task set, per task id, the greedy episode's figures, and the sampled share."""

    epoch: float
    step: int
    tokens: int
    per_task: dict[str, dict[str, dict[str, float]]]  # set -> task id -> progress, accuracy, messages, valid
    share_differing: float | None  # None: not sampled
    sampled_tasks: int
    extra: dict[str, float] = field(default_factory=dict)  # reported, not ruled on

    @classmethod
    def from_scores(cls, epoch: float, step: int, tokens: int, scores: dict) -> Scored:
        """From bench/sft_budget_bench.score_one's document (its sampled part skipped: no share)."""
        sampled = scores["sampled"]
        return cls(
            epoch,
            step,
            tokens,
            {s: scores[s]["per_task"] for s in SETS},
            sampled.get("sampled/share_differing"),
            sampled.get("sampled/tasks", 0),
            {"sampled/format_valid": sampled["sampled/format_valid"]} if "sampled/format_valid" in sampled else {},
        )

    def figure(self, name: str) -> float | None:
        """'<set>/<figure>' over the set's tasks, or 'sampled/share_differing' (None: not sampled)."""
        if name == "sampled/share_differing":
            return self.share_differing
        if name in self.extra:
            return self.extra[name]
        tasks = self.per_task[name.split("/")[0]]
        return _figure(tasks, list(tasks), name.split("/")[1])


@dataclass(frozen=True)
class Verdict:
    """The chosen budget (None: not even the full one passes its targets) and every budget's failures."""

    chosen: Scored | None
    full: Scored
    failures: dict[int, list[str]]  # step -> the figures that fail there (empty: passes)

    def as_dict(self) -> dict:
        c = self.chosen
        return {
            "chosen": None if c is None else {"epoch": c.epoch, "step": c.step, "tokens": c.tokens},
            "full": {"epoch": self.full.epoch, "step": self.full.step, "tokens": self.full.tokens},
            "tokens_ratio": None if c is None else round(c.tokens / self.full.tokens, 3),
            "failures": {str(k): v for k, v in self.failures.items()},
        }


def _figure(tasks: dict, ids: list[str], what: str) -> float:
    """Mean progress or accuracy over `ids`, or format validity as valid messages over messages."""
    if what == "format_valid":
        msgs = sum(tasks[i]["messages"] for i in ids)
        return sum(tasks[i]["valid_messages"] for i in ids) / msgs if msgs else 0.0
    return sum(tasks[i][what] for i in ids) / len(ids)


def paired_upper(budget: dict, full: dict, what: str, boots: int = BOOTS, seed: int = 0) -> float:
    """The upper end of the paired bootstrap 95% interval of figure(budget) - figure(full), resampling tasks."""
    ids = sorted(set(budget) & set(full))

    def parts(tasks: dict) -> tuple:  # a figure is sum(num) / sum(den) over the tasks drawn
        if what == "format_valid":
            return np.array([tasks[i]["valid_messages"] for i in ids]), np.array([tasks[i]["messages"] for i in ids])
        return np.array([float(tasks[i][what]) for i in ids]), np.ones(len(ids))

    draws = bootstrap_indices(len(ids), boots, np.random.default_rng(seed))
    (bn, bd), (fn, fd) = parts(budget), parts(full)
    diffs = bn[draws].sum(1) / np.maximum(bd[draws].sum(1), 1) - fn[draws].sum(1) / np.maximum(fd[draws].sum(1), 1)
    return quantile_interval(diffs)[1]


def wilson_low(share: float, n: int) -> float:
    """The lower end of the Wilson 95% interval of a proportion `share` of `n`."""
    return wilson(share * n, n)[0] if n else 0.0


def failures_greedy(budget: dict, full: dict) -> list[str]:
    """The per-task figures (set -> task id -> figures) on which `budget` is lower than `full` beyond noise."""
    return [f"{s}/{w}" for s in SETS for w in PAIRED if paired_upper(budget[s], full[s], w) < 0]


def failures(budget: Scored, full: Scored) -> list[str]:
    """The figures on which `budget` is lower than `full` beyond noise, or misses a target (module docstring);
    a budget not sampled (its greedy figures failed first) fails the sampled share too."""
    out = failures_greedy(budget.per_task, full.per_task)
    if budget.share_differing is None or budget.share_differing < wilson_low(full.share_differing, full.sampled_tasks):
        out.append("sampled/share_differing")
    out += [f"target {k}" for k, floor in TARGETS.items() if not _meets(budget.figure(k), k, floor)]
    return out


def _meets(value: float | None, name: str, floor: float) -> bool:
    if value is None:
        return False
    return value > floor if name == "seeds/progress" else value >= floor


def pick_budget(scored: list[Scored]) -> Verdict:
    """The smallest budget that passes, with every larger budget scored passing too (a lucky snapshot between
    failing ones is not a budget); the last of `scored` (by step) is the full build."""
    scored = sorted(scored, key=lambda s: s.step)
    full = scored[-1]
    fails = {s.step: failures(s, full) for s in scored}
    chosen = None
    for s in reversed(scored):
        if fails[s.step]:
            break
        chosen = s
    return Verdict(chosen, full, fails)


def budget_table(scored: list[Scored]) -> list[dict]:
    """One row per budget: its size and every figure the rule reads (and the sampled format validity)."""
    names = [f"{s}/{w}" for s in SETS for w in PAIRED] + ["sampled/share_differing"]
    return [
        {
            "epoch": s.epoch,
            "step": s.step,
            "tokens": s.tokens,
            **{n: None if s.figure(n) is None else round(s.figure(n), 3) for n in names},
            **{k: round(v, 3) for k, v in s.extra.items()},
        }
        for s in sorted(scored, key=lambda s: s.step)
    ]
