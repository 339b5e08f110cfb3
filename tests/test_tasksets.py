"""The run's task sets: a pool drawn at random from the train split by a seed (rods_core.tasksets.random_draw)."""

from __future__ import annotations

import pytest

from rods_core.benchmarks.bfcl.seeds import load_seeds, split_of
from rods_core.config import RunConfig
from rods_core.tasksets import TaskSetError, random_draw


def test_a_random_pool_is_reproducible_from_its_seed_whatever_the_order_of_the_selection():
    train = load_seeds("train", ("base",))
    a = random_draw(train, 12, seed=7)
    assert [t.id for t in a] == [t.id for t in random_draw(list(reversed(train)), 12, seed=7)]
    assert len({t.id for t in a}) == 12 and all(split_of(t.id) == "train" for t in a)
    assert [t.id for t in a] != [t.id for t in random_draw(train, 12, seed=8)]


def test_a_random_pool_larger_than_the_selection_is_refused_naming_the_field():
    with pytest.raises(TaskSetError, match="seeds.random.n: 500 tasks asked but the selection holds 100"):
        random_draw(load_seeds("train", ("base",)), 500, seed=0)


def test_bfcl_variants_come_from_its_synthesizer_with_the_runs_synth_settings_as_the_pipeline_makes_them():
    from rods_core.benchmarks.bfcl.demo import demo_seeds
    from rods_core.benchmarks.bfcl.synth.pipeline import synthesize_many
    from rods_core.rng import derive_seed
    from rods_core.tasksets import fresh_variants, run_benchmark

    cfg = RunConfig.model_validate({"synthesis": {"n_per_parent": 1}})
    assert run_benchmark(cfg).synthesizer.cfg is cfg.synthesis  # the synthesis: section reaches BFCL's synthesizer
    seeds = demo_seeds()[:4]
    got = fresh_variants(seeds, 2, cfg, "warm-start", run_benchmark(cfg))
    want, _ = synthesize_many(seeds, 2, None, cfg.synthesis, seed=derive_seed(cfg.seed, "warm-start"))
    assert [t.model_dump() for t in got] == [t.model_dump() for t in want] and got
