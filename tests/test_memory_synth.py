"""The memory template synthesizer: variants keep the topology, change the fact everywhere, replay by
execution, are deterministic per seed, and a test-split parent is refused."""

from __future__ import annotations

import random
import re

import pytest

from rods_core.benchmarks.memory.answers import answer_matches
from rods_core.benchmarks.memory.benchmark import BfclMemory
from rods_core.benchmarks.memory.synth import (
    Substitution,
    apply,
    check_variant,
    grounded_fact,
    number_plan,
    number_words,
)
from rods_core.benchmarks.memory.tasks import load_memory_seeds
from rods_core.ids import is_valid_id


def test_number_words_spell_as_bfcl_answers_do():
    pairs = []
    for t in load_memory_seeds("all"):
        digits = [a for a in t.answers if a.isdigit()]
        words = [a for a in t.answers if re.fullmatch(r"[A-Za-z ]+", a) and not a.isupper()]
        if digits and words:
            pairs.append((int(digits[0]), words[0].lower()))
    assert len(pairs) >= 20
    assert [number_words(n) for n, _ in pairs] == [w for _, w in pairs]


@pytest.mark.parametrize("backend", ["kv", "rec_sum"])
def test_variants_change_the_fact_consistently_and_replay(backend, tmp_path):
    bench = BfclMemory(backend, synth_workdir=tmp_path)
    made = 0
    for parent in bench.seeds("train")[:8]:
        variants = bench.synthesizer.variants(parent, 2, seed=3).accepted
        assert [v.id for v in variants] == [v.id for v in bench.synthesizer.variants(parent, 2, seed=3).accepted]
        for v in variants:
            made += 1
            assert is_valid_id(v.id) and v.provenance.parent_id == parent.id
            assert [len(s) for s in v.sessions] == [len(s) for s in parent.sessions]
            assert v.answers != parent.answers and not answer_matches(str(v.answers), parent.answers)
            convo = " ".join(u for s in v.sessions for u in s)
            assert answer_matches(convo, v.answers) and not answer_matches(convo, parent.answers)
            assert bench.verify(v, tmp_path).ok
    assert made >= 6


def test_an_inconsistent_variant_is_rejected(tmp_path):
    parent = next(t for t in load_memory_seeds("train") if number_plan(t, random.Random(0)))
    sub = number_plan(parent, random.Random(0))
    old, new = sub.forms[0]
    stale = apply(parent, sub, "stale_variant").model_copy(update={"sessions": parent.sessions})
    verdict = check_variant(parent, stale, sub, "kv", tmp_path)
    assert not verdict.ok and "still in the task" in verdict.reason
    ungrounded = apply(parent, Substitution(((old + "0000", new),), sub.answers, "no-op"), "ungrounded")
    assert not check_variant(parent, ungrounded, sub, "kv", tmp_path).ok
    assert grounded_fact(apply(parent, sub, "ok_variant")) is not None


def test_a_test_split_parent_is_refused():
    bench = BfclMemory("kv")
    with pytest.raises(ValueError, match="not a synthesis parent"):
        bench.synthesizer.variants(bench.seeds("test")[0], 1, seed=0)


@pytest.mark.parametrize("answer", ["²", "9" * 5000, "12345"])
def test_a_number_the_template_cannot_hold_is_no_plan_and_no_exception(answer, tmp_path):
    """An edited task's answer that `isdigit` admits but `int` refuses ("²", 5,000 digits) gives no number
    plan, so the synthesizer returns no variant rather than failing the whole job (or `rods sft --variants`)."""
    seed = load_memory_seeds("train")[0]
    task = seed.model_copy(update={"answers": [answer], "sessions": [[f"My number is {answer}. Noted?"]]})
    assert number_plan(task, random.Random(0)) is None
    synth = BfclMemory("kv", prereq="fact", synth_workdir=tmp_path).synthesizer
    assert synth.variants(task, 2, seed=0).accepted == []
