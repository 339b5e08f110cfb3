"""The per-turn check with BFCL multi-turn semantics, accuracy, and the progress reward.

BFCL (eval_checker/multi_turn_eval/multi_turn_checker.py) replays the ground truth beside the model and,
after each turn whose ground truth is non-empty, requires (1) that the model made a call in that turn,
(2) that every public attribute of every instance equals the ground truth's (state check), and (3) that
the ground truth's results of that turn appear, as a multiset, among all the model's results so far
(execution-result check). Turns with an empty ground truth (miss_param's "ask" turns, miss_func's
arrival turns) are not checked. Accuracy = every checked turn passes (BFCL stops at the first failure).

Departure: BFCL stops at the first failing turn; the progress reward keeps going and scores the share
of checked turns that pass, so partial competence earns partial credit (the paper's progress reward).
Because every checked turn needs the state and the results, a policy that does nothing scores 0.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from rods_core.benchmarks.bfcl.environment import BfclEnvironment
from rods_core.benchmarks.bfcl.tasks import Task


@dataclass
class TurnVerdict:
    turn: int
    checked: bool
    passed: bool
    reason: str = ""


@dataclass
class Score:
    """The outcome of one episode against its task's ground truth."""

    task_id: str
    turns: list[TurnVerdict] = field(default_factory=list)

    @property
    def checked(self) -> list[TurnVerdict]:
        return [t for t in self.turns if t.checked]

    @property
    def accuracy(self) -> float:
        """1.0 when every checked turn passed (BFCL's multi-turn accuracy), else 0.0."""
        return float(all(t.passed for t in self.checked))

    @property
    def progress(self) -> float:
        """Share of checked turns that passed, in [0, 1]."""
        c = self.checked
        return sum(t.passed for t in c) / len(c) if c else 1.0


def _multiset_contains(haystack: list[str], needles: list[str]) -> list[str]:
    """Needles missing from the haystack, counting repeats (BFCL's _is_subsequence_unordered)."""
    have = Counter(haystack)
    missing = []
    for n in needles:
        if have[n] > 0:
            have[n] -= 1
        else:
            missing.append(n)
    return missing


class TurnChecker:
    """Advances a ground-truth environment turn by turn and judges a model environment against it.

    Used by episodes (after each user turn, no second model replay) and by `score_calls`.
    """

    def __init__(self, task: Task):
        self.task = task
        self.gt_env = BfclEnvironment(task)
        self.model_results: list[str] = []  # all the model's results so far, as BFCL accumulates them
        self.score = Score(task.id)

    def record(self, results: list[str]) -> None:
        self.model_results.extend(results)

    def check_turn(self, turn: int, model_env: BfclEnvironment, made_calls: bool) -> TurnVerdict:
        gt_calls = self.task.ground_truth[turn]
        self.gt_env.start_turn(turn)
        gt_results = [o.result for c in gt_calls for o in self.gt_env.execute(c)]
        if not gt_calls:
            verdict = TurnVerdict(turn, checked=False, passed=True, reason="not checked (empty ground truth)")
        elif not made_calls:
            verdict = TurnVerdict(turn, True, False, "no call in a turn that expects calls")
        else:
            verdict = self._compare(turn, model_env, gt_results)
        self.score.turns.append(verdict)
        return verdict

    def _compare(self, turn: int, model_env: BfclEnvironment, gt_results: list[str]) -> TurnVerdict:
        model_state, gt_state = model_env.public_state(), self.gt_env.public_state()
        for cls, attrs in gt_state.items():
            diff = [k for k, v in attrs.items() if model_state[cls].get(k) != v]
            if diff:
                return TurnVerdict(turn, True, False, f"state of {cls} differs in {diff}")
        missing = _multiset_contains(self.model_results, gt_results)
        if missing:
            return TurnVerdict(turn, True, False, f"missing execution results {[m[:80] for m in missing]}")
        return TurnVerdict(turn, True, True)


def score_calls(task: Task, turns: list[list[str]], *, hints: bool = False) -> Score:
    """Execute one list of call strings per user turn (in order) and score them against the task.

    A call string may hold several calls (`[a(), b()]`); a string that does not parse counts as no call,
    as BFCL's decoder drops it.
    """
    if len(turns) != task.n_turns:
        raise ValueError(f"{task.id}: answer has {len(turns)} turns, the task has {task.n_turns}")
    env, checker = BfclEnvironment(task, hints=hints), TurnChecker(task)
    for t, calls in enumerate(turns):
        env.start_turn(t)
        made = False
        for c in calls:
            obs = env.execute(c)
            parsed = [o for o in obs if o.call is not None]
            made = made or bool(parsed)
            checker.record([o.result for o in parsed])
        checker.check_turn(t, env, made)
    return checker.score
