"""Every benchmark passes the conformance suite; the BFCL adapter plays episodes exactly as the rollout does."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from benchmark_conformance import (
    check_app_facts,
    check_do_nothing,
    check_ground_truth,
    check_hostile_calls,
    check_isolation,
    check_leak_of_copy,
    check_splits,
    check_synthesizer,
    check_task_round_trip,
    do_nothing,
)
from policy_helpers import demo_texts, load_tokenizer, replay
from pydantic import BaseModel

from rods_core.benchmarks.bfcl.benchmark import BfclMultiTurn
from rods_core.benchmarks.bfcl.checker import score_calls
from rods_core.benchmarks.bfcl.tasks import Provenance
from rods_core.benchmarks.memory.benchmark import BfclMemory
from rods_core.benchmarks.protocols import (
    Benchmark,
    Environment,
    EpisodeScore,
    RecordChecks,
    Step,
    evaluate,
    scripted_policy,
    verify_with,
)
from rods_core.benchmarks.toolcalls.messages import read_message


class CounterTask(BaseModel):
    """A third, minimal benchmark: bring a counter from 0 to `target` with `add(n)`, then say the total."""

    id: str
    target: int
    provenance: Provenance = Provenance()

    def content_key(self) -> str:
        return str(self.target)


class CounterEnv:
    def __init__(self, task: CounterTask):
        self.task, self.total, self.reply = task, 0, None

    def tools(self):
        return [{"type": "function", "function": {"name": "add", "parameters": {"properties": {"n": {}}}}}]

    def reset(self):
        return [{"role": "user", "content": f"Reach {self.task.target}, then tell me the total."}]

    def step(self, message):
        calls = read_message(message)
        if not calls.is_tool_call:
            self.reply = calls.text
            return Step([], True)
        ok = not calls.error and all(
            c.name == "add" and set(c.kwargs) == {"n"} and type(c.kwargs["n"]) is int and abs(c.kwargs["n"]) < 100
            for c in calls.calls
        )
        self.total += sum(c.kwargs["n"] for c in calls.calls) if ok else 0
        return Step([{"role": "tool", "content": str(self.total) if ok else "Error: add(n) only"}], False)

    def finish(self):
        pass

    def score(self):
        ok = self.total == self.task.target and self.reply == str(self.task.target)
        return EpisodeScore(float(self.total == self.task.target) / 2 + float(ok) / 2, ok)


class Counter(RecordChecks):
    name, task_type, synthesizer, structure = "counter", CounterTask, None, None

    def seeds(self, split):
        every = [CounterTask(id=f"count_{i}", target=i) for i in range(1, 9)]
        return [t for t in every if split == "all" or (t.target % 4 == 0) == (split == "test")]

    def leak_reason(self, task):
        return "a held-out target" if task.target % 4 == 0 else None

    def environment(self, task, workdir):
        return CounterEnv(task)

    def reference_policy(self, task):
        return scripted_policy(
            [
                {"role": "assistant", "content": "", "tool_calls": [f"add(n={task.target})"]},
                {"role": "assistant", "content": str(task.target)},
            ]
        )

    def verify(self, task, workdir):
        return verify_with(self, task, workdir)

    def render(self, task):
        return f"**{task.id}**: reach {task.target}"

    def group_of(self, task):
        return "even" if task.target % 2 == 0 else "odd"


BENCHMARKS = {
    "counter": Counter,
    "bfcl_multi_turn": BfclMultiTurn,
    "bfcl_memory_kv": lambda: BfclMemory("kv"),
    "bfcl_memory_rec_sum": lambda: BfclMemory("rec_sum"),
    "bfcl_memory_kv_fact": lambda: BfclMemory("kv", prereq="fact"),
}


@pytest.fixture(scope="module", params=sorted(BENCHMARKS))
def bench(request) -> Benchmark:
    return BENCHMARKS[request.param]()


def _sample(tasks: list, n: int) -> list:
    """Every k-th task: a spread over categories/scenarios, not the first few of one."""
    return tasks[:: max(1, len(tasks) // n)][:n]


def test_implements_the_protocols(bench, tmp_path):
    assert isinstance(bench, Benchmark)
    assert isinstance(bench.environment(bench.seeds("train")[0], tmp_path), Environment)


def test_the_apps_facts_structure_and_distance_come_from_the_benchmark(bench, tmp_path):
    check_app_facts(bench, tmp_path)


def test_splits_are_disjoint_and_guarded(bench):
    check_splits(bench)


def test_leak_guard_catches_a_copied_test_task(bench):
    check_leak_of_copy(bench)


def test_tasks_round_trip_and_render(bench):
    check_task_round_trip(bench)


def test_every_seed_ground_truth_scores_full_marks(bench, tmp_path):
    check_ground_truth(bench, bench.seeds("all"), tmp_path)


def test_do_nothing_scores_below_full_marks(bench, tmp_path):
    check_do_nothing(bench, bench.seeds("all"), tmp_path)


def test_hostile_calls_execute_nothing(bench, tmp_path):
    for task in _sample(bench.seeds("all"), 4):
        check_hostile_calls(bench, task, tmp_path)


def test_synthesized_variants_replay(bench, tmp_path):
    checked = check_synthesizer(bench, tmp_path)
    assert checked > 0 or bench.synthesizer is None


def test_evaluation_reports_overall_and_per_group(bench, tmp_path):
    tasks = _sample(bench.seeds("test"), 10)
    ref = evaluate(bench, bench.reference_policy, tasks, tmp_path)
    nothing = evaluate(bench, lambda _task: do_nothing, tasks, tmp_path)
    assert ref["overall"] == {"n": len(tasks), "accuracy": 1.0, "progress": 1.0}
    assert nothing["overall"]["accuracy"] == 0.0 and nothing["overall"]["progress"] < 1.0
    assert set(ref["by_group"]) == {bench.group_of(t) for t in tasks}
    assert sum(g["n"] for g in ref["by_group"].values()) == len(tasks)
    json.dumps(ref)


def test_environments_of_one_task_share_no_state(bench, tmp_path):
    for task in _sample(bench.seeds("all"), 12):
        check_isolation(bench, task, tmp_path)


# ----- BFCL multi-turn: the adapter is the existing episode, not a new one ---------------------------
def _perturbations(task) -> list[list[list[str]]]:
    """Answers that fail in different places: a turn's last call dropped, a turn emptied, calls swapped."""
    gt = task.ground_truth
    out = []
    for t, calls in enumerate(gt):
        if calls:
            out.append([c[:-1] if i == t else c for i, c in enumerate(gt)])
            out.append([[] if i == t else c for i, c in enumerate(gt)])
        if len(calls) > 1:
            out.append([c[::-1] if i == t else c for i, c in enumerate(gt)])
    return out


def test_bfcl_adapter_scores_as_the_checker_does(tmp_path):
    """On every seed, the ground truth and perturbed answers score the same through the adapter as through
    bfcl.checker.score_calls (the scorer behind `rods env score` and the published replay figures)."""
    bench = BfclMultiTurn()
    agree = total = 0
    for task in _sample(bench.seeds("all"), 200):
        for answer in [task.ground_truth, *_perturbations(task)]:
            msgs = []
            for calls in answer:
                msgs += [{"role": "assistant", "content": "", "tool_calls": calls}] if calls else []
                msgs.append({"role": "assistant", "content": "Done."})
            env = bench.environment(task, tmp_path)
            env.reset()
            for m in msgs:
                env.step(m)
            env.finish()
            ref = score_calls(task, answer)
            total += 1
            agree += (env.score().progress, env.score().accuracy) == (ref.progress, bool(ref.accuracy))
    print(f"bfcl adapter vs score_calls: {agree}/{total} agree")
    assert agree == total, f"{agree}/{total} agree"


def test_bfcl_adapter_replays_the_rollout_transcript(tiny_model_dir, train_seeds, tmp_path):
    """The same assistant texts give the adapter the same conversation and score as rollout.run_episodes."""
    from rods_core.config import EpisodeConfig
    from rods_core.rollout import episode_benchmark, run_episodes

    tok = load_tokenizer(tiny_model_dir)
    bench = BfclMultiTurn()
    for task in _sample(train_seeds, 8):
        texts, _msgs, _tools = demo_texts(tok, task)
        broken = ["<tool_call>\n{broken\n</tool_call>", *texts[1:]]
        for script in (texts, broken, ["I do not know."] * len(texts)):
            ep = run_episodes(
                [task],
                replay(tok, list(script)),
                EpisodeConfig(max_context_tokens=10**6),
                benchmark=episode_benchmark(EpisodeConfig(), "bfcl_multi_turn"),
            )[0]
            env = bench.environment(task, tmp_path)
            convo, it = list(env.reset()), iter(script)
            assert env.tools() == _tools
            done = False
            while not done:
                msg = {"role": "assistant", "content": next(it)}
                step = env.step(msg)
                convo += [msg, *step.messages]
                done = step.done
            assert convo == ep.transcript
            assert (env.score().progress, float(env.score().accuracy)) == (ep.reward, ep.accuracy)


def test_benchmarks_package_imports_no_app_storage_or_training():
    """The interface and its benchmarks stay a leaf of the library: no app, store, bench or trainer imports
    (counting imports inside functions), so any layer may use them."""
    banned = ("storage", "streamlit", "plotly", "bench", "torch", "trl", "transformers", "pages")
    banned_core = ("rods_core.trainer", "rods_core.rollout", "rods_core.loop", "rods_lab.cli", "rods_core.buffer")
    root = Path(__file__).parents[1] / "rods_core" / "benchmarks"
    for path in root.rglob("*.py"):  # the wings too
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            for name in names:
                assert name.split(".")[0] not in banned, f"{path.name} imports {name}"
                assert not name.startswith(banned_core), f"{path.name} imports {name}"


def test_every_benchmarks_executor_applies_the_same_bounds_as_bfcls():
    from rods_core.benchmarks.toolcalls.dispatch import MAX_INT_ARG, MAX_PRECISION, ToolDoc, execute
    from rods_core.benchmarks.toolcalls.parsing import Call

    class Calc:  # a documented tool class as the memory backends are: the executor binds and bounds its calls
        def power(self, base: float, exponent: float, precision: int = 10) -> dict:
            return {"result": type(exponent).__name__}

    params = {"base": {"type": "float"}, "exponent": {"type": "float"}, "precision": {"type": "integer"}}
    docs = {"power": ToolDoc("power", {"name": "power", "parameters": {"properties": params}})}
    assert execute(Calc(), docs, Call("power", (), {"base": 10, "exponent": 3})) == ('{"result": "float"}', True)
    text, ok = execute(Calc(), docs, Call("power", (), {"base": 10, "exponent": MAX_INT_ARG + 1}))
    assert not ok and "too large" in text
    text, ok = execute(Calc(), docs, Call("power", (), {"base": 2.0, "exponent": 1.0, "precision": MAX_PRECISION + 1}))
    assert not ok and f"at most {MAX_PRECISION} digits" in text


def test_the_worker_synthesizes_bfcl_through_the_protocol_as_the_pipeline_does():
    """Synthesis beside training calls `Synthesizer.variants` for every benchmark: BFCL multi-turn's, built with
    a run's `synthesis:` settings, given the worker's seed and pool keys, makes the very attempts (each stage's
    verdict, each variant) of the pipeline's own `synthesize`, so the run logs the same per-stage counts."""
    from rods_core.benchmarks.bfcl.synth.pipeline import synthesize
    from rods_core.benchmarks.synth_worker import worker_job
    from rods_core.config import SynthesisConfig

    cfg = SynthesisConfig(n_per_parent=2, max_attempts=8, seed=5)
    seeds = BfclMultiTurn().seeds("train")
    parent, keys = seeds[0], {t.content_key() for t in seeds[:10]}
    job = worker_job(BfclMultiTurn(synth=cfg.model_copy(update={"seed": 0})).synthesizer)
    got, want = job(parent, 2, keys, cfg), synthesize(parent, 2, keys, cfg)
    assert [(a.outcomes, a.variant) for a in got.attempts] == [(a.outcomes, a.variant) for a in want.attempts]
    assert got.counts() == want.counts() and got.accepted


def test_a_list_synthesizers_duplicates_and_shortfall_are_rejected_attempts():
    """A synthesizer that makes a plain list (memory's, a test's) reports it as attempts: a variant already in
    the pool and each one short of n are rejected at augment, so its per-stage counts add up to n."""
    from rods_core.benchmarks.synthesis import listed_result

    parent = CounterTask(id="count_1", target=1)
    variants = [CounterTask(id=f"v{i}", target=t, provenance=Provenance(source="synth")) for i, t in enumerate((2, 3))]
    res = listed_result(parent.id, variants, 4, {variants[0].content_key()})
    assert res.accepted == [variants[1]]
    assert [a.reason for a in res.attempts] == [
        "duplicates a task in the pool",
        "accepted",
        "the synthesizer found no further verified variant",
        "the synthesizer found no further verified variant",
    ]
    assert res.counts()["augment"]["accepted"] == 1 and res.counts()["augment"]["rejected"] == 3


def test_an_edit_verified_by_the_trainer_plays_inside_the_runs_scratch_folder(tmp_path, monkeypatch):
    """The trainer verifies edits at the step boundary in its run's scratch folder (memory snapshots go with
    the run); the folder made for one verification is removed after it, verdict unchanged."""
    from rods_core.benchmarks.edits import verify_edit

    bench = BfclMemory("kv")
    task = bench.seeds("train")[0]
    seen = []
    real = bench.edit_problem

    def recording(t, parent, workdir):
        seen.append(workdir)
        return real(t, parent, workdir)

    monkeypatch.setattr(bench, "edit_problem", recording)
    scratch = tmp_path / "run" / "scratch"
    assert verify_edit(bench, task, scratch=scratch) == verify_edit(bench, task)
    assert seen[0].parent == scratch and seen[1].parent != scratch
    assert scratch.is_dir() and not any(scratch.iterdir())
