"""Seed split: 400/400, 100/100 per category, scenario-level, deterministic; the leak guard."""

from __future__ import annotations

from collections import Counter

from rods_core.seeds import leak_guard, load_seeds, scenario_index, split_of
from rods_core.tasks import Message


def test_split_sizes_and_no_shared_scenarios():
    train, test = load_seeds("train"), load_seeds("test")
    assert len(train) == len(test) == 400
    assert (
        Counter(t.category for t in train)
        == Counter(t.category for t in test)
        == {
            "base": 100,
            "miss_func": 100,
            "miss_param": 100,
            "long_context": 100,
        }
    )
    assert not {scenario_index(t.id) for t in train} & {scenario_index(t.id) for t in test}


def test_split_is_deterministic():
    assert [split_of(f"multi_turn_base_{i}") for i in range(200)] == [
        split_of(f"multi_turn_long_context_{i}") for i in range(200)
    ]
    assert split_of("multi_turn_base_0") == split_of("multi_turn_base_0")


def test_leak_guard_by_id_and_by_content():
    guard = leak_guard()
    test_task, train_task = load_seeds("test")[0], load_seeds("train")[0]
    assert guard.is_test(test_task) and not guard.is_test(train_task)
    renamed = test_task.model_copy(update={"id": "imported_42"})
    assert guard.reason(renamed) == "same content as a test-split task"
    reworded_calls = renamed.model_copy(update={"ground_truth": [[] for _ in renamed.ground_truth]})
    assert guard.is_test(reworded_calls)  # same user turns
    shouting = renamed.model_copy(
        update={"question": [[Message(content=m.content.upper() + "  ") for m in turn] for turn in renamed.question]}
    )
    assert guard.is_test(shouting)  # normalised: case and whitespace do not hide a copy
