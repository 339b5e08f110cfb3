"""Hostile tool calls: every one gets an error observation; no file, process or other instance is touched."""

from __future__ import annotations

import ast
import copy
import functools
import os
import subprocess
import threading

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from rods_core.benchmarks.bfcl.environment import BfclEnvironment
from rods_core.benchmarks.bfcl.seeds import load_seeds

SENTINEL = "/tmp/rods_hostile_sentinel"
HAND_WRITTEN = [
    f"__import__('os').system('touch {SENTINEL}')",
    f"open('{SENTINEL}', 'w')",
    "eval('1+1')",
    "exec('x=1')",
    "globals()",
    "cd.__globals__",
    "cd(folder=__import__('os').getcwd())",
    "ls.__self__.root",
    "GorillaFileSystem().rm(file_name='x')",
    "rods_agree_gt_GorillaFileSystem_instance.rm(file_name='x')",
    "cd(folder=ls())",
    "cd(folder=x)",
    "cd(folder=lambda: 1)",
    "cd(folder=[i for i in range(3)])",
    "cd(folder=f'{1}')",
    "cd(**{'folder': 'x'})",
    "cd(*['x'])",
    "cd(folder='a' * 10)",
    "power(base=10, exponent=10**100)",
    "power(base=10, exponent=" + "9" * 50 + ")",
    "mkdir(dir_name='" + "a" * 30_000 + "')",
    "cd(folder=" + "[" * 1000 + "]" * 1000 + ")",
    "(" * 5000,
    "[" * 200 + "ls()" + "]" * 200,
    "__class__()",
    "_load_scenario({})",
    "cd(folder='x', folder='y')",
    "cd(folder=b'bytes')",
    "cd(folder=1j)",
    "cd(folder=...)",
    "import os",
    "os.system('id')",
    "subprocess.run(['id'])",
    "cd(folder='x'); rm(file_name='y')",
    "ls(a=True) if True else rm()",
    "no_such_function()",
    "cd(unknown_arg='x')",
    "cd(folder=123)",
    "mkdir()",
    '{"name": "__import__", "arguments": {"name": "os"}}',
    '{"name": "rm", "arguments": "not json"}',
    '{"name": "cd", "arguments": {"folder": {"__class__": 1}}}',
    '[{"name": "exec", "arguments": {}}]',
    '{"name": "cd.__globals__", "arguments": {}}',
    "",
    "\x00",
    "🙂(x=1)",
]
TEMPLATES = [
    "__import__({s!r})",
    "open({s!r})",
    "cd(folder={s})",
    "{s}()",
    "cd.{s}",
    "cd(folder=cd.{s})",
    "eval({s!r})",
    "rm(file_name=__import__({s!r}))",
    "getattr(cd, {s!r})",
    "cd(folder={s!r}.join([]))",
    "exec({s!r})",
    "[cd(folder={s!r}), __import__('os')]",
]


@functools.cache
def _seed_task():
    # a file-system + messaging task: both classes carry state another episode could corrupt
    return next(t for t in load_seeds("train") if {"GorillaFileSystem", "MessageAPI"} <= set(t.involved_classes))


def _task():
    """A fresh deep copy per example; loading the 400 seeds per example made this file take 85 s, not 3."""
    return _seed_task().model_copy(deep=True)


@pytest.fixture
def guarded(monkeypatch, tmp_path):
    """Any attempt to start a process is recorded; the cwd is an empty folder that must stay empty."""
    started = []

    def deny(*a, **k):
        started.append(a)
        raise PermissionError("process creation is forbidden in this test")

    for target, name in [(subprocess, "Popen"), (os, "system"), (os, "popen"), (os, "fork"), (os, "execv")]:
        monkeypatch.setattr(target, name, deny)
    monkeypatch.chdir(tmp_path)
    if os.path.exists(SENTINEL):
        os.remove(SENTINEL)
    env, other = BfclEnvironment(_task()), BfclEnvironment(_task())
    before_env, before_other = copy.deepcopy(env.public_state()), copy.deepcopy(other.public_state())
    yield env
    assert started == []
    assert list(tmp_path.iterdir()) == []
    assert not os.path.exists(SENTINEL)
    assert env.public_state() == before_env
    assert other.public_state() == before_other


def _assert_all_errors(env, payload):
    obs = env.execute(payload)
    assert obs, payload
    for o in obs:
        assert not o.ok and o.result.startswith("Error during execution"), (payload[:80], o.result[:200])


def test_hand_written_hostile_calls(guarded):
    for payload in HAND_WRITTEN:
        _assert_all_errors(guarded, payload)


def _is_plain_call(payload: str) -> bool:
    """A named function called with literal arguments only: a legitimate tool call, free to succeed.
    Two templates splice the text in raw, so `cd(folder="")` or `ls()` can come out of them (CI drew
    the first once)."""
    try:
        node = ast.parse(payload, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and all(isinstance(a, ast.Constant) for a in node.args)
        and all(k.arg is not None and isinstance(k.value, ast.Constant) for k in node.keywords)
    )


def test_a_legitimate_call_spliced_from_a_template_is_told_apart():
    assert _is_plain_call('cd(folder="")') and _is_plain_call("ls()")
    assert not _is_plain_call("cd(folder=ls())") and not _is_plain_call("cd.__globals__")


@settings(max_examples=1000, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(TEMPLATES), st.text(min_size=0, max_size=40))
@example("cd(folder={s})", '""').via("drawn by CI on 2026-12-01")
@example("{s}()", "ls")
def test_property_based_hostile_calls(template, s):
    env = BfclEnvironment(_task())
    before = copy.deepcopy(env.public_state())
    payload = template.format(s=s)
    if _is_plain_call(payload):
        assert all(isinstance(o.result, str) for o in env.execute(payload))
    else:
        _assert_all_errors(env, payload)
        assert env.public_state() == before
    assert not os.path.exists(SENTINEL)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_text_never_raises(text):
    env = BfclEnvironment(_task())
    for o in env.execute(text):
        assert isinstance(o.result, str)


def test_two_environments_in_threads_never_share_state():
    task = next(t for t in load_seeds("train") if "GorillaFileSystem" in t.involved_classes)
    errors = []

    def worker(k: int):
        try:
            for i in range(50):
                env = BfclEnvironment(task)
                start = copy.deepcopy(env.public_state()["GorillaFileSystem"]["root"])
                env.execute(f"mkdir(dir_name='t{k}_{i}')")
                if not any(o.ok for o in env.execute("ls()")):
                    errors.append("ls failed")
                fresh = BfclEnvironment(task).public_state()["GorillaFileSystem"]["root"]
                if fresh != start:
                    errors.append(f"thread {k}: a fresh environment saw another's change")
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_hundredth_episode_starts_from_the_same_state(all_seeds):
    for cat in ("base", "long_context"):
        for task in [t for t in all_seeds if t.category == cat][:3]:
            first = copy.deepcopy(BfclEnvironment(task).public_state())
            for _ in range(99):
                env = BfclEnvironment(task)
                for turn, calls in enumerate(task.ground_truth):
                    env.start_turn(turn)
                    for c in calls:
                        env.execute(c)
            assert BfclEnvironment(task).public_state() == first


def test_held_back_functions_arrive_at_their_turn(all_seeds):
    task = next(t for t in all_seeds if t.category == "miss_func")
    ((turn, fns),) = task.missed_function.items()
    env = BfclEnvironment(task)
    assert not set(fns) & set(env.available_functions(0))
    assert set(fns) <= set(env.available_functions(turn))
    assert "not available" in env.execute(f"{fns[0]}()")[0].result


def test_numbers_that_would_run_for_seconds_are_refused(all_seeds):
    """Unbounded integers: `10 ** 10_000_000` or mpmath at ten million digits ran 24 s in one call."""
    math_task = next(t for t in all_seeds if "MathAPI" in t.involved_classes)
    env = BfclEnvironment(math_task)
    for payload in [
        "power(base=10, exponent=10000000)",
        "power(base=10, exponent=1e300)",
        "square_root(number=2, precision=10000000)",
        "logarithm(value=2, base=10, precision=10000000)",
        "add(a=" + "9" * 40 + ", b=1)",
    ]:
        _assert_all_errors(env, payload)
    (ok,) = env.execute("power(base=2, exponent=10)")
    assert ok.ok and "1024.0" in ok.result  # a documented float arrives as a float
