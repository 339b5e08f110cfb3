"""The conformance suite every benchmark must pass: split without overlap, a leak guard that catches a copied
test task, ground truth that scores full marks through the Environment, a do-nothing episode that does not,
hostile tool calls that execute nothing and never raise, and environments of one task that share no state."""

from __future__ import annotations

from pathlib import Path

from rods_core.benchmarks.protocols import (
    Benchmark,
    Distance,
    Environment,
    EpisodeScore,
    Message,
    Step,
    TaskFacts,
    TaskStructure,
    play,
)

DO_NOTHING = {"role": "assistant", "content": "I do not know."}
SENTINEL = "rods_conformance_sentinel"


def do_nothing(_convo: list[Message]) -> Message:
    return dict(DO_NOTHING)


def hostile_messages(sentinel: Path, tool_name: str, params: list[str]) -> list[Message]:
    """Assistant messages that try to run code, reach attributes, call what is not a tool, or flood."""
    touch = f"__import__('os').system('touch {sentinel}')"
    huge = "x" * 15_000
    calls: list = [
        touch,
        f"os.system('touch {sentinel}')",
        "().__class__.__bases__[0].__subclasses__()",
        f'eval("{touch}")',
        f"exec(source=\"open('{sentinel}', 'w')\")",
        "no_such_function(x=1)",
        "_flush_memory_to_local_file()",
        "_load_scenario(initial_config={}, long_context=False)",
        {"name": "__init__", "arguments": {}},
        {"name": "open", "arguments": {"file": str(sentinel), "mode": "w"}},
        f"{tool_name}(" + ", ".join(f"{p}='{huge}'" for p in params) + ")",
        f"{tool_name}(" + ", ".join(f"{p}={'9' * 5000}" for p in params or ["x"]) + ")",
        f"{tool_name}(x=" + "[" * 5000 + "]" * 5000 + ")",
        "f(x='" + "y" * 200_000 + "')",
        123,
    ]
    texts = [
        f"<tool_call>\n{touch}\n</tool_call>",
        f"[{touch}]",
        '<tool_call>\n{"name": "' + tool_name + '", "arguments": {"__class__": 1}}\n</tool_call>',
        "<tool_call>\n{broken json\n</tool_call>",
    ]
    odd = [
        {"role": "assistant", "content": ["not", "text"]},
        {"role": "assistant", "content": None, "tool_calls": touch},
        {"role": "assistant", "content": "", "tool_calls": {"name": "open", "arguments": "{not json"}},
    ]
    return (
        [{"role": "assistant", "content": "", "tool_calls": [c]} for c in calls]
        + odd
        + [{"role": "assistant", "content": t} for t in texts]
    )


def _first_tool(env: Environment) -> tuple[str, list[str]]:
    fn = env.tools()[0]["function"]
    return fn["name"], list(fn.get("parameters", {}).get("properties", {}))


def check_splits(bench: Benchmark) -> None:
    """Train and test are non-empty and disjoint, make up `all`, and the leak guard separates them."""
    train, test, every = bench.seeds("train"), bench.seeds("test"), bench.seeds("all")
    assert train and test, f"{bench.name}: an empty split"
    train_ids, test_ids = {t.id for t in train}, {t.id for t in test}
    assert not train_ids & test_ids, f"{bench.name}: ids in both splits: {sorted(train_ids & test_ids)[:5]}"
    assert train_ids | test_ids == {t.id for t in every}
    leaking = [t.id for t in train if bench.leak_reason(t)]
    assert not leaking, f"{bench.name}: train tasks the leak guard calls test: {leaking[:5]}"
    missed = [t.id for t in test if not bench.leak_reason(t)]
    assert not missed, f"{bench.name}: test tasks the leak guard lets through: {missed[:5]}"


def check_leak_of_copy(bench: Benchmark) -> None:
    """A test task re-offered under a new id is still refused."""
    for task in bench.seeds("test")[:20]:
        copy = bench.task_type.model_validate({**task.model_dump(mode="json"), "id": "copied_test_task"})
        assert bench.leak_reason(copy), f"{bench.name}: a copy of {task.id} under a new id passed the leak guard"


def check_task_round_trip(bench: Benchmark) -> None:
    """Tasks survive their JSON form (the JSONL export and the store), and render for the app."""
    for task in bench.seeds("all")[:50]:
        assert bench.task_type.model_validate(task.model_dump(mode="json")) == task
        text = bench.render(task)
        assert isinstance(text, str) and task.id in text


def check_ground_truth(bench: Benchmark, tasks: list, workdir: Path) -> list[EpisodeScore]:
    """Every task's ground-truth path, run through a fresh Environment, scores progress 1.0 and accuracy."""
    failed, scores = [], []
    for task in tasks:
        verdict = bench.verify(task, workdir)
        scores.append(verdict.score)
        if not (verdict.ok and verdict.score.progress == 1.0 and verdict.score.accuracy):
            failed.append((task.id, verdict.reason))
    assert not failed, f"{bench.name}: {len(failed)}/{len(tasks)} ground truths fail: {failed[:3]}"
    return scores


def check_do_nothing(bench: Benchmark, tasks: list, workdir: Path) -> None:
    """A policy that never calls a tool scores below full marks on every task."""
    scores = {t.id: _do_nothing_score(bench, t, workdir) for t in tasks}
    full = [tid for tid, s in scores.items() if s.progress >= 1.0 or s.accuracy]
    assert not full, f"{bench.name}: do-nothing earns full marks on {full[:5]}"


def _do_nothing_score(bench: Benchmark, task, workdir: Path) -> EpisodeScore:
    return play(bench.environment(task, workdir), do_nothing)


def check_hostile_calls(bench: Benchmark, task, workdir: Path) -> None:
    """Hostile calls return error messages, never raise out of step(), write nothing, and change no score."""
    sentinel = workdir / SENTINEL
    env = bench.environment(task, workdir)
    env.reset()
    for msg in hostile_messages(sentinel, *_first_tool(env)):
        step = env.step(msg)
        assert isinstance(step, Step) and all(isinstance(m, dict) for m in step.messages)
        if step.done:
            break
    assert not sentinel.exists(), f"{bench.name}: a hostile call created a file"
    env.finish()
    assert env.score().progress == _do_nothing_score(bench, task, workdir).progress
    assert not env.score().accuracy


def check_isolation(bench: Benchmark, task, workdir: Path) -> None:
    """Two environments of one task, played step by step side by side, each score full marks; a third,
    made afterwards, starts from the task's own initial state (do-nothing scores as it does alone)."""
    alone = _do_nothing_score(bench, task, workdir)
    envs = [bench.environment(task, workdir) for _ in range(2)]
    policies = [bench.reference_policy(task) for _ in envs]
    convos = [list(e.reset()) for e in envs]
    done = [False, False]
    for _ in range(400):
        for i, env in enumerate(envs):
            if done[i]:
                continue
            msg = policies[i](convos[i])
            step = env.step(msg)
            convos[i] = list(step.messages) if step.new_session else [*convos[i], msg, *step.messages]
            done[i] = step.done
        if all(done):
            break
    for env in envs:
        s = env.score()
        assert s.progress == 1.0 and s.accuracy, f"{bench.name}: {task.id} lost full marks beside a twin: {s}"
    assert _do_nothing_score(bench, task, workdir) == alone, f"{bench.name}: {task.id} kept state across episodes"


def check_synthesizer(bench: Benchmark, workdir: Path, parents: int = 12) -> int:
    """Variants of train seeds are new tasks (new ids, provenance synth), may train, and replay to full
    marks through a fresh Environment; returns how many variants were checked."""
    if bench.synthesizer is None:
        return 0
    checked = 0
    for task in bench.seeds("train")[:parents]:
        for v in bench.synthesizer.variants(task, 2, seed=1).accepted:
            assert v.id != task.id and v.provenance.source == "synth" and v.provenance.parent_id == task.id
            assert bench.leak_reason(v) is None, f"{bench.name}: variant {v.id} trips the leak guard"
            verdict = bench.verify(v, workdir)
            assert verdict.ok, f"{bench.name}: variant {v.id} does not replay: {verdict.reason}"
            checked += 1
    return checked


def check_app_facts(bench: Benchmark, workdir: Path) -> None:
    """What the app shows of a task comes from the benchmark: its facts name its group, its structure is
    charted for every task or none, a task is at distance 0 from itself and changed from no parent, and a
    train seed passes the task-file door's check."""
    tasks = bench.seeds("train")[:6]
    for t in tasks:
        facts = bench.facts(t)
        assert isinstance(facts, TaskFacts) and facts.group == bench.group_of(t)
        if bench.structure is not None:
            s = bench.structure(t)
            assert isinstance(s, TaskStructure) and (s.turns, s.calls) == (facts.turns, facts.calls)
        assert bench.distance(t, t) == Distance(0, 0, 0)
        assert bench.distance(None, t) != Distance(0, 0, 0)
    assert bench.import_problem(tasks[0], workdir) is None
