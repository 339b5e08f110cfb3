"""An experiment's held-out sets (rods_lab.experiments.heldout): exactly the size asked or a stop with the yields,
saved and hashed, read back only unchanged; training tasks checked against them by content, and a run rejecting
a synthesized variant that equals one (synthesis.exclude)."""

from __future__ import annotations

import json

import pytest

from rods_core.benchmarks.bfcl.demo import demo_seeds
from rods_core.benchmarks.bfcl.seeds import split_of
from rods_core.config import RunConfig, SynthesisConfig
from rods_core.tasksets import eval_tasks, run_benchmark
from rods_lab.experiments.heldout import HeldOutShort, HeldOutSpec, build, collisions, exclude_files, load

SPEC = HeldOutSpec(h1_per_seed=5, h2_seeds=2, h2_per_seed=3, h3=6, seed=1)


@pytest.fixture(scope="module")
def heldout(tmp_path_factory):
    out = tmp_path_factory.mktemp("heldout")
    build(demo_seeds()[:3], SPEC, SynthesisConfig(max_attempts=4), out)  # 4 attempts: raised until each seed yields 5
    return out


def test_the_sets_are_exactly_the_size_asked_saved_hashed_and_apart_from_the_pool(heldout):
    manifest, sets = load(heldout)
    pool = demo_seeds()[:3]
    assert {k: len(v) for k, v in sets.items()} == {"H1": 15, "H2": 6, "H3": 6}
    assert manifest["sets"]["H1"]["yield_per_seed"] == {t.id: 5 for t in pool}
    assert all(len(m["sha256"]) == 64 for m in manifest["sets"].values())
    assert {t.provenance.parent_id for t in sets["H1"]} == {t.id for t in pool}
    assert not {t.provenance.parent_id for t in sets["H2"]} & {t.id for t in pool}  # transfer: other seeds
    assert all(split_of(t.id) == "test" for t in sets["H3"]) and all(split_of(t.id) == "train" for t in pool)
    keys = [t.content_key() for name in ("H1", "H2") for t in sets[name]] + [t.content_key() for t in pool]
    assert len(keys) == len(set(keys))  # no held-out variant equals a seed or another variant


def test_the_same_spec_gives_the_same_files_and_a_changed_file_is_refused(heldout, tmp_path):
    again = build(demo_seeds()[:3], SPEC, SynthesisConfig(max_attempts=4), tmp_path)
    first = json.loads((heldout / "manifest.json").read_text())
    assert {k: v["sha256"] for k, v in again["sets"].items()} == {k: v["sha256"] for k, v in first["sets"].items()}
    (tmp_path / "H2.jsonl").write_text(
        (tmp_path / "H2.jsonl").read_text().replace("multi_turn", "multi_turn", 1) + "\n"
    )
    with pytest.raises(ValueError, match="H2.jsonl: its sha256 differs"):
        load(tmp_path)


def test_a_set_that_cannot_be_made_whole_stops_with_every_seeds_yield(tmp_path):
    with pytest.raises(HeldOutShort, match=r"H1: \d+ of 2 seeds yielded fewer than 40 variants in 8 attempts: \{"):
        build(demo_seeds()[:2], HeldOutSpec(h1_per_seed=40, max_attempts=8), SynthesisConfig(max_attempts=2), tmp_path)
    assert not (tmp_path / "manifest.json").exists()


def test_h1min_lets_a_seed_give_what_it_yields_and_records_it(tmp_path):
    """With h1_min_per_seed 0 the same short seeds make H1 of what they yield, each seed's yield in the manifest
    (and H2 with h2_min_seeds takes the parents there are); h1_min_per_seed above a seed's yield still stops."""
    spec = HeldOutSpec(
        h1_per_seed=40, h2_seeds=99, h2_per_seed=1, h3=2, max_attempts=8, h1_min_per_seed=0, h2_min_seeds=1
    )  # fmt: skip (H2: 99 parents asked, as few as one accepted)
    manifest = build(demo_seeds()[:2], spec, SynthesisConfig(max_attempts=2), tmp_path)
    yields = manifest["sets"]["H1"]["yield_per_seed"]
    assert set(yields) == {t.id for t in demo_seeds()[:2]} and all(n < 40 for n in yields.values())
    assert manifest["sets"]["H1"]["n"] == sum(yields.values())
    assert 1 <= manifest["sets"]["H2"]["n"] < 99
    with pytest.raises(HeldOutShort, match="fewer than 39 variants"):
        build(demo_seeds()[:2], HeldOutSpec(h1_per_seed=40, max_attempts=8, h1_min_per_seed=39),
              SynthesisConfig(max_attempts=2), tmp_path / "strict")  # fmt: skip


def test_collisions_are_found_by_content_whatever_the_id(heldout):
    _, sets = load(heldout)
    copy = sets["H1"][0].model_copy(update={"id": "renamed_variant"})
    assert collisions([copy, *demo_seeds()[:3]], sets) == {"H1": ["renamed_variant"], "H2": [], "H3": []}


def test_a_run_evaluates_on_the_file_and_rejects_a_variant_equal_to_a_held_out_task(heldout):
    from rods_core.benchmarks.synthesis import Attempt, StageOutcome, SynthResult
    from rods_core.ranks import Ranks
    from rods_core.step import RodsStep
    from rods_core.tasksets import HELDOUT_REASON
    from tests.test_step import BOUNDARY, report

    _, sets = load(heldout)
    files = exclude_files(heldout)
    cfg = RunConfig.model_validate(
        {
            "method": "rods",
            "eval": {"split": "file", "file": files[0], "limit": None},
            "synthesis": {
                "parents_per_step": 1,
                "deterministic": True,
                "apply_after": 0,
                "exclude": files,
                "n_per_parent": 2,
            },
        }
    )
    assert [t.id for t in eval_tasks(cfg, demo_seeds()[:3], set(), run_benchmark(cfg))] == [t.id for t in sets["H1"]]
    pool = demo_seeds()[:3]
    cur = RodsStep(cfg, pool, Ranks(), run_benchmark(cfg))
    fresh = sets["H1"][0].model_copy(update={"id": "same_content_new_id"})

    def job(parent, n, keys, c):  # a synthesizer that proposes a held-out task under a new id, and a new one
        ok = [StageOutcome("augment", True, "ok")]
        return SynthResult(
            parent.id, [Attempt(list(ok), fresh), Attempt(list(ok), pool[1].model_copy(update={"id": "x"}))]
        )

    cur.worker._job = job
    try:
        out = cur.after_step(1, report([(t.id, BOUNDARY) for t in pool]), [])
    finally:
        cur.close()
    reasons = [r["reason"] for r in out.events["variant"]]
    assert f"augment: {HELDOUT_REASON} H1" in reasons
    assert "same_content_new_id" not in cur.all_ids()


def test_transfer_reads_each_runs_last_checkpoint_and_pairs_it_with_static_by_seed():
    import pandas as pd

    from rods_lab.experiments.heldout_report import synthesized, transfer

    rows = []
    for arm, effect in (("static", 0.0), ("rods", 0.05)):
        for seed, level in enumerate((0.2, 0.4, 0.3)):
            for step, gain in ((0, 0.0), (10, 0.01), (20, effect)):
                rows.append({"run": f"{arm}_r{seed}", "method": arm, "seed": seed, "step": step, "set": "H2", "n": 64,
                             "progress": level + gain})  # fmt: skip
    (static, rods) = sorted(transfer(pd.DataFrame(rows)), key=lambda r: r["arm"] != "static")
    assert rods["progress"] == pytest.approx(0.35) and rods["tasks"] == 64 and rods["n"] == 3
    c = rods["vs_static"]
    assert c["paired"] and c["diff"] == pytest.approx(0.05) and c["above"] == 3 and static["vs_static"] is None
    groups = pd.DataFrame({"run": ["rods_r0"] * 3 + ["offline_small_r0"] * 2, "method": ["rods"] * 3 + ["offline_small"] * 2,
                           "task_id": ["s1", "v1", "v2", "s1", "w1"]})  # fmt: skip
    steps = pd.DataFrame({"run": ["rods_r0", "offline_small_r0"], "trajectories_total": [96.0, 96.0]})
    said = {r["arm"]: r["distinct_synthesized"] for r in synthesized(groups, steps, {"s1"})}
    assert said == {"rods": 2, "offline_small": 1}


def test_held_out_tasks_avoid_the_warm_starts_tasks_and_seeds(tmp_path):
    from rods_core.tasksets import fresh_variants

    pool = demo_seeds()[:2]
    cfg = RunConfig()
    trained = demo_seeds() + fresh_variants(
        pool, 3, cfg, "warm-start", run_benchmark(cfg)
    )  # the warm start saw variants of the pool
    build(
        pool, HeldOutSpec(h1_per_seed=3, h2_seeds=2, h2_per_seed=1, h3=2), SynthesisConfig(), tmp_path, trained=trained
    )
    _, sets = load(tmp_path)
    assert collisions(trained, sets) == {"H1": [], "H2": [], "H3": []}
    assert not {t.provenance.parent_id for t in sets["H2"]} & {t.id for t in demo_seeds()}


def test_h1b_takes_parents_only_where_the_warm_start_scores_above_0_and_records_them(tmp_path):
    scored = []

    def progress(tasks):  # stands in for the warm-started model's greedy progress: every other candidate passes
        scored.extend(t.id for t in tasks)
        return {t.id: (0.5 if i % 2 == 0 else 0.0) for i, t in enumerate(tasks)}

    spec = HeldOutSpec(h1_per_seed=1, h2_seeds=2, h2_per_seed=1, h3=2, seed=2, h2_solvable=True)
    manifest = build(demo_seeds()[:2], spec, SynthesisConfig(max_attempts=4), tmp_path, parent_progress=progress)
    assert list(manifest["sets"]) == ["H1", "H1b", "H3"] and (tmp_path / "H1b.jsonl").is_file()
    h1b = manifest["sets"]["H1b"]
    assert h1b["parents_passed"] == scored[::2] and set(h1b["parent_progress"]) == set(scored)
    _, sets = load(tmp_path)
    assert {t.provenance.parent_id for t in sets["H1b"]} <= set(h1b["parents_passed"]) and len(sets["H1b"]) == 2
    assert exclude_files(tmp_path)[1].endswith("H1b.jsonl")
    with pytest.raises(ValueError, match="give parent_progress"):
        build(demo_seeds()[:2], spec, SynthesisConfig(max_attempts=4), tmp_path / "no")


def test_scoring_cut_short_resumes_at_the_score_it_was_making_and_gives_the_uninterrupted_rows(
    tmp_path, tiny_model_dir, monkeypatch
):
    """A process killed while scoring a run's checkpoints (a session's end) keeps every (checkpoint, set) score it
    finished: the next call scores only the rest, a line the kill cut short is dropped, and the rows equal an
    uninterrupted scoring's."""
    import shutil

    from rods_lab.experiments import heldout
    from tests.app_helpers import smoke_config

    cfg = RunConfig.model_validate(smoke_config(tmp_path, tiny_model_dir))
    tasks = demo_seeds()[:2]
    sets = {"A": tasks[:1], "B": tasks}

    def a_run(name):
        for step in (2, 4):
            shutil.copytree(tiny_model_dir, tmp_path / name / "checkpoints" / f"checkpoint-{step}")
        return tmp_path / name

    played, real = [], heldout.evaluate

    def counted(folder, ts, ecfg):
        played.append((folder.rsplit("-", 1)[1], len(ts)))
        if len(played) == 4 and stop:
            raise KeyboardInterrupt  # the kill, during the fourth score
        return real(folder, ts, ecfg)

    monkeypatch.setattr(heldout, "evaluate", counted)
    stop = False
    whole = heldout.score_checkpoints(a_run("whole"), sets, cfg, log=lambda *_: None, sampled=(tasks[:1], 2))
    assert len(played) == 5 and not (tmp_path / "whole" / heldout.PARTIAL).exists()

    cut = a_run("cut")
    played.clear()
    stop = True
    with pytest.raises(KeyboardInterrupt):
        heldout.score_checkpoints(cut, sets, cfg, log=lambda *_: None, sampled=(tasks[:1], 2))
    partial = cut / heldout.PARTIAL
    assert len(partial.read_text().splitlines()) == 3 and not (cut / heldout.SCORES).exists()
    with partial.open("a") as f:
        f.write('{"key": "cut sho')  # a line the kill cut short
    played.clear()
    stop = False
    rows = heldout.score_checkpoints(cut, sets, cfg, log=lambda *_: None, sampled=(tasks[:1], 2))
    assert played == [("4", 2), ("4", 2)]  # B at step 4, then the sampled score: 1 task x 2 samples
    assert rows == whole == json.loads((cut / heldout.SCORES).read_text()) and not partial.exists()

    played.clear()  # a checkpoint written again is scored again
    (cut / "checkpoints" / "checkpoint-4" / "config.json").touch()
    partial.write_text("".join(json.dumps({"key": heldout.score_key(f, n, ts), "row": {}}) + "\n"
                               for f, n, ts in [(cut / "checkpoints" / "checkpoint-2", "A", sets["A"])]))  # fmt: skip
    heldout.score_checkpoints(cut, sets, cfg, log=lambda *_: None)
    assert [s for s, _ in played] == ["2", "4", "4"]
