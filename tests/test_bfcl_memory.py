"""BFCL v4 memory: the answer check agrees with BFCL's own, episodes chain sessions with state carried in
their own backend, hostile calls execute nothing, snapshots stay in the given folder, the split holds."""

from __future__ import annotations

import os
import re
from importlib import resources
from pathlib import Path

import pytest
from bfcl_eval.eval_checker.agentic_eval.agentic_checker import agentic_checker

from rods_core.benchmarks.memory.answers import answer_matches
from rods_core.benchmarks.memory.benchmark import BfclMemory
from rods_core.benchmarks.memory.env import AGENTIC_FORMAT
from rods_core.benchmarks.memory.tasks import (
    MAX_SESSIONS,
    TEST_SCENARIOS,
    MemoryTask,
    fact_session,
    load_memory_seeds,
    memory_leak_guard,
)
from rods_core.benchmarks.protocols import play

BACKENDS = ("kv", "rec_sum")


def _reply(answer: str) -> str:
    return str({"answer": answer, "context": "from my memory"})


def _perturbed(task: MemoryTask, other: MemoryTask) -> list[str]:
    """Replies that should mostly fail, each in a different way, plus near-misses BFCL still accepts."""
    a = task.answers[0]
    out = [
        _reply("I do not know"),
        _reply(other.answers[0]),
        _reply("x" + a),  # glued to a word: no word boundary
        _reply(a + "s"),
        _reply(a[: max(1, len(a) // 2)]),
        _reply(a.upper()),  # case is ignored
        _reply(a.replace(" ", "-")),  # '-' is dropped, so "a-b" reads "ab"
        _reply(" ".join(a)),  # spaced out letters
        a,  # the bare answer, no format
        "",
    ]
    out += [_reply(re.sub(r"\d+", lambda m: str(int(m.group()) + 1), a))] if re.search(r"\d", a) else []
    return out


def test_answer_check_agrees_with_bfcl_on_every_task():
    tasks = load_memory_seeds("all")
    agree = total = gt_pass = perturbed_fail = 0
    for i, task in enumerate(tasks):
        gt = [_reply(a) for a in task.answers]
        perturbed = _perturbed(task, tasks[(i + 7) % len(tasks)])
        for reply in gt + perturbed:
            ours, theirs = answer_matches(reply, task.answers), agentic_checker(reply, task.answers)["valid"]
            total += 1
            agree += ours == theirs
        gt_pass += sum(answer_matches(r, task.answers) for r in gt)
        perturbed_fail += sum(not answer_matches(r, task.answers) for r in perturbed)
    n_gt = sum(len(t.answers) for t in tasks)
    print(f"memory answer check vs BFCL agentic_checker: {agree}/{total} agree; ground truth {gt_pass}/{n_gt} pass;")
    print(f"  perturbed replies failing: {perturbed_fail}/{total - n_gt}")
    assert agree == total
    assert gt_pass == n_gt
    assert perturbed_fail > (total - n_gt) // 2  # the perturbations test something


def test_split_is_by_scenario_with_a_leak_guard():
    train, test = load_memory_seeds("train"), load_memory_seeds("test")
    assert (len(train), len(test)) == (80, 75)
    assert {t.scenario for t in test} == TEST_SCENARIOS
    assert not {t.scenario for t in train} & TEST_SCENARIOS
    guard = memory_leak_guard()
    t = test[0]
    renamed = t.model_copy(update={"id": "fresh_id", "scenario": "customer"})
    assert guard.reason(renamed) == "same question as a test-split task"
    reworded = renamed.model_copy(update={"question": "Something else entirely?"})
    assert guard.reason(reworded) == "a prerequisite conversation of a test scenario"
    assert guard.reason(train[0]) is None


@pytest.mark.parametrize("backend", BACKENDS)
def test_episode_chains_sessions_and_carries_memory(backend, tmp_path):
    bench = BfclMemory(backend)
    task = bench.seeds("train")[0]
    env, policy = bench.environment(task, tmp_path), bench.reference_policy(task)
    convo, opened = env.reset(), []
    assert convo[0]["role"] == "system" and AGENTIC_FORMAT not in convo[0]["content"]
    while True:
        msg = policy(convo)
        step = env.step(msg)
        if step.new_session:
            opened.append(step.messages[0]["content"])
        convo = list(step.messages) if step.new_session else [*convo, msg, *step.messages]
        if step.done:
            break
    assert len(opened) == len(task.sessions)  # each prerequisite conversation, then the question
    assert AGENTIC_FORMAT in opened[-1] and convo[1]["content"] == task.question
    if backend == "rec_sum":  # the unified memory is shown in every later session's system prompt
        assert task.answers[0] in opened[0]
    assert env.score().accuracy


def test_two_episodes_do_not_share_memory(tmp_path):
    bench = BfclMemory("kv")
    task = bench.seeds("train")[0]
    a, b = bench.environment(task, tmp_path), bench.environment(task, tmp_path)
    a.reset(), b.reset()
    a.step({"role": "assistant", "content": "", "tool_calls": ["archival_memory_add(key='k', value='v')"]})
    a.step({"role": "assistant", "content": "", "tool_calls": ["core_memory_add(key='c', value='v')"]})
    step = b.step({"role": "assistant", "content": "", "tool_calls": ["archival_memory_list_keys()"]})
    assert step.messages[0]["content"] == '{"keys": []}'
    assert a.memory.core_memory == {"c": "v"} and b.memory.core_memory == {}
    assert a.folder != b.folder


@pytest.mark.parametrize("backend", BACKENDS)
def test_hostile_memory_calls_execute_nothing(backend, tmp_path):
    bench = BfclMemory(backend)
    task = bench.seeds("train")[0]
    env = bench.environment(task, tmp_path / "run")
    env.reset()
    sentinel = tmp_path / "pwned"
    tool = "core_memory_add" if backend == "kv" else "memory_append"
    arg = "key='k', value" if backend == "kv" else "text"
    hostile = [
        f"{tool}({arg}=__import__('os').system('touch {sentinel}'))",
        f"{tool}({arg}=open('{sentinel}', 'w'))",
        f"{tool}({arg}=snapshot_folder)",
        "_flush_memory_to_local_file()",
        "_prepare_snapshot(initial_config={'model_result_dir': '/tmp', 'test_id': 'x', 'scenario': 'x'})",
        "_load_scenario(initial_config={})",
        "__init__()",
        {"name": "_dump_core_memory_to_context", "arguments": {}},
        f"{tool}({arg}='" + "y" * 19_000 + "')",
        "archival_memory_key_search(query='a', k=" + "9" * 25 + ")",
        "memory_retrieve()" if backend == "kv" else "core_memory_retrieve(key='k')",  # another backend's tool
    ]
    before = {k: v for k, v in vars(env.memory).items() if k not in ("snapshot_folder", "latest_snapshot_file")}
    for call in hostile:
        step = env.step({"role": "assistant", "content": "", "tool_calls": [call]})
        assert (
            step.messages[0]["content"].startswith("Error during execution: ") or "error" in step.messages[0]["content"]
        )
    after = {k: v for k, v in vars(env.memory).items() if k not in ("snapshot_folder", "latest_snapshot_file")}
    assert after == before and not sentinel.exists()


@pytest.mark.parametrize("backend", BACKENDS)
def test_snapshots_stay_inside_the_given_folder(backend, tmp_path):
    package = Path(str(resources.files("bfcl_eval")))
    package_files = {p for p in package.rglob("*") if "__pycache__" not in p.parts}
    bench, run = BfclMemory(backend), tmp_path / "runs" / "r1" / "memory"
    for task in bench.seeds("train")[:3]:
        assert play(bench.environment(task, run), bench.reference_policy(task)).accuracy
    written = [Path(root) / f for root, _, files in os.walk(tmp_path) for f in files]
    assert written and all(p.resolve().is_relative_to(run.resolve()) for p in written)
    assert {p for p in package.rglob("*") if "__pycache__" not in p.parts} == package_files


def test_task_fields_that_reach_paths_are_refused():
    base = load_memory_seeds("train")[0].model_dump(mode="json")
    for field, value in (("scenario", "../../etc"), ("id", "../x"), ("id", "a/b")):
        with pytest.raises(ValueError):
            MemoryTask.model_validate({**base, field: value})


def test_an_empty_prerequisite_conversation_is_refused_by_the_schema_naming_it():
    """A conversation with no user turn has nothing to open its session with: the schema names it, where the
    episode would fail with an IndexError inside its verifier."""
    base = load_memory_seeds("train")[0].model_dump(mode="json")
    with pytest.raises(ValueError, match=r"sessions\.1\s+List should have at least 1 item"):
        MemoryTask.model_validate({**base, "sessions": [base["sessions"][0], []]})


def test_a_task_of_more_prerequisite_conversations_than_the_bound_is_refused_by_the_schema():
    """Thousands of one-line sessions fit a 1 MB edit and would take their verification ~3 ms each."""
    base = load_memory_seeds("train")[0].model_dump(mode="json")
    assert max(len(t.sessions) for t in load_memory_seeds("all")) <= MAX_SESSIONS
    MemoryTask.model_validate({**base, "sessions": [["a"]] * MAX_SESSIONS})
    with pytest.raises(ValueError, match=rf"sessions\s+List should have at most {MAX_SESSIONS} items"):
        MemoryTask.model_validate({**base, "sessions": [["a"]] * 5000})


def test_fact_mode_plays_only_the_conversation_that_states_the_answer(tmp_path):
    bench = BfclMemory("kv", prereq="fact")
    task = next(t for t in bench.seeds("train") if fact_session(t) not in (None, 0))
    env = bench.environment(task, tmp_path)
    assert env.sessions == [task.sessions[fact_session(task)]]
    assert answer_matches(" ".join(env.sessions[0]), task.answers)
    with pytest.raises(ValueError, match="prereq must be"):
        BfclMemory("kv", prereq="some")


def test_content_key_sees_through_ids_case_and_spacing_and_records_round_trip():
    task = load_memory_seeds("train")[0]
    same = task.model_copy(
        update={"id": "my_copy", "question": "  " + task.question.upper(), "answers": task.answers[::-1]}
    )
    assert same.content_key() == task.content_key()
    other = task.model_copy(update={"answers": [task.answers[0] + " and more"]})
    assert other.content_key() != task.content_key()
    assert type(task).model_validate(task.to_record()) == task


@pytest.mark.parametrize("blank", ["", "   ", "..."])
def test_verify_refuses_an_empty_or_blank_accepted_answer(blank, tmp_path):
    """An answer that standardizes to nothing matches every reply: the task is refused before it is played."""
    bench = BfclMemory("kv", prereq="fact")
    seed = bench.seeds("train")[0]
    assert bench.verify(seed, tmp_path).ok
    for answers in ([blank], [*seed.answers, blank]):
        verdict = bench.verify(seed.model_copy(update={"answers": answers}), tmp_path)
        assert not verdict.ok and "empty or blank" in verdict.reason and repr(blank) in verdict.reason
