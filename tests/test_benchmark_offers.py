"""What a benchmark offers beyond the protocol (protocols.SeedStatistics, DemoSeeds, AnswerScoring, SynthCommand):
BFCL multi-turn offers each, memory none, and the lab reaches them through the protocol, never the wing."""

from __future__ import annotations

import pytest

from rods_core.benchmarks.protocols import AnswerScoring, DemoSeeds, SeedStatistics, SynthCommand
from rods_core.benchmarks.registry import make_benchmark

OFFERS = (SeedStatistics, DemoSeeds, AnswerScoring, SynthCommand)


@pytest.mark.parametrize("name, offers", [("bfcl_multi_turn", True), ("bfcl_memory_kv", False)])
def test_each_benchmark_offers_what_it_defines(name, offers):
    bench = make_benchmark(name)
    assert [isinstance(bench, kind) for kind in OFFERS] == [offers] * len(OFFERS)


def test_bfcl_seed_rows_and_stats_count_the_same_tasks():
    bench = make_benchmark("bfcl_multi_turn")
    tasks = bench.seeds("all")
    rows = bench.seed_rows(tasks)
    assert [r["id"] for r in rows] == [t.id for t in tasks]
    assert {r["split"] for r in rows} == {"train", "test"}
    stats = bench.seed_stats(tasks)
    assert stats["tasks"] == len(rows) and sum(stats["by_category"].values()) == len(rows)
    assert all(t.id in {r["id"] for r in rows} for t in bench.demo_seeds())


def test_bfcl_replays_its_own_seeds_clean():
    bench = make_benchmark("bfcl_multi_turn")
    report = bench.replay_report(bench.demo_seeds())
    assert report["passed"] == report["tasks"] > 0 and report["failed"] == []
