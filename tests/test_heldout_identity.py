"""Held-out and offline sets are made through the benchmark's Synthesizer (protocols.Synthesizer), and they are byte
for byte the sets the five-stage pipeline made when the lab called it directly: the pre-registered experiment's
held-out sets are hash-checked, so a set rebuilt by this code must hash the same. The hashes below were made by
that earlier code on the same inputs."""

from __future__ import annotations

import hashlib
import random

from rods_core.benchmarks.registry import make_benchmark
from rods_core.config import SynthesisConfig
from rods_lab.experiments.heldout import HeldOutSpec, build
from rods_lab.experiments.offline import offline_variants, write_offline_seeds

HELDOUT_SHA256 = {
    "H1": "5e1da13a2155eb94412142f4784b7611a9c9797c7428a47c51d9e5193c140917",
    "H2": "a719c94bca1bb2c78e5365c3a7b5e9c4cf7243ff72c0e65e1552bb932d3fce23",
    "H3": "d7d29269ba26537ea63675fc235c683f7fe96e8faf7a9bc48b700ac4c76a0596",
}
MANIFEST_SHA256 = "7445c444873a05a2f155f29b3106b3094bed8d21d665864c9fdd94054e3a918c"
OFFLINE_SHA256 = "0e0489d2b6fff97f886f8ab64ff23160475ba766f033b6225492b13430810187"


def _pool(n: int, seed: int) -> list:
    bench = make_benchmark("bfcl_multi_turn")
    return sorted(random.Random(seed).sample(sorted(bench.seeds("train"), key=lambda t: t.id), n), key=lambda t: t.id)


def test_a_heldout_build_hashes_as_the_pipeline_made_it(tmp_path):
    spec = HeldOutSpec(
        h1_per_seed=3, h2_seeds=4, h2_per_seed=2, h3=10, seed=3, max_attempts=64, h1_min_per_seed=0, h2_min_seeds=0
    )
    trained = make_benchmark("bfcl_multi_turn").demo_seeds()[:4]
    manifest = build(_pool(6, 7), spec, SynthesisConfig(max_attempts=4), tmp_path, trained=trained)
    assert {name: m["sha256"] for name, m in manifest["sets"].items()} == HELDOUT_SHA256
    assert hashlib.sha256((tmp_path / "manifest.json").read_bytes()).hexdigest() == MANIFEST_SHA256


def test_an_offline_set_hashes_as_the_pipeline_made_it(tmp_path):
    pool = _pool(5, 11)
    heldout = {t.content_key(): "H1" for t in make_benchmark("bfcl_multi_turn").seeds("test")[:20]}
    variants, stats = offline_variants(pool, 13, SynthesisConfig(), 5, heldout)
    write_offline_seeds(tmp_path / "offline.jsonl", pool, variants, stats)
    assert hashlib.sha256((tmp_path / "offline.jsonl").read_bytes()).hexdigest() == OFFLINE_SHA256
