"""The pool-replicates design's primary outcome and P1-P3 (rods_lab.experiments.pool_criteria) on synthetic replicates: the
area, support, refutation, inconclusive, the interim stop and its continuation, Holm within P1-P3 alone."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from rods_core.statistics import holm, paired_t
from rods_lab.experiments.pool_criteria import (
    FINAL_ALPHA,
    areas,
    evaluate,
    far_task_diffs,
    far_task_markdown,
    from_summaries,
    length_from_summaries,
    planned_look,
    progress_area,
    run_length,
)


def test_progress_area_is_the_mean_rise_over_the_evaluations_after_step_0():
    assert progress_area({0: 0.5, 10: 0.6, 20: 0.7}) == pytest.approx(0.15)
    assert progress_area({20: 0.4, 0: 0.5, 10: 0.5}) == pytest.approx(-0.05)  # order never matters
    assert math.isnan(progress_area({10: 0.6})) and math.isnan(progress_area({0: 0.5}))


def make(k: int, rods_minus: dict[str, float], sd: float, seed: int = 0) -> dict[str, dict[int, float]]:
    """Areas of K replicates: a base area per replicate, rods = base, each reference = base - its gap + noise."""
    rng = np.random.default_rng(seed)
    base = rng.uniform(0.0, 0.1, k)
    out = {"rods": dict(enumerate(base))}
    for ref, gap in rods_minus.items():
        out[ref] = dict(enumerate(base - gap + rng.normal(0, sd, k)))
    return out


def verdicts(look) -> dict[str, str]:
    return {t.name: t.verdict for t in look.tests}


def test_support_at_the_final_look():
    look = evaluate(make(16, {"static": 0.06, "uniform_parents": 0.05, "offline_large": 0.0}, sd=0.02))
    assert look.look == "final" and look.k == 16 and look.alpha == FINAL_ALPHA
    assert verdicts(look) == {"P1": "supported", "P2": "supported", "P3": "supported"}
    p1 = look.tests[0]
    assert p1.lo > 0 and p1.p_holm < FINAL_ALPHA and "final analysis" in look.decision


def test_refutation_at_the_final_look():
    look = evaluate(make(16, {"static": 0.0, "uniform_parents": -0.01, "offline_large": -0.1}, sd=0.01))
    assert verdicts(look) == {"P1": "refuted", "P2": "refuted", "P3": "refuted"}
    assert all(t.hi < 0.02 for t in look.tests[:2]) and look.tests[2].hi < -0.03


def test_inconclusive_when_the_interval_spans_both_margins():
    look = evaluate(make(16, {"static": 0.01, "uniform_parents": 0.01, "offline_large": -0.03}, sd=0.2, seed=1))
    assert verdicts(look) == {"P1": "inconclusive", "P2": "inconclusive", "P3": "inconclusive"}


def test_the_interim_stops_only_when_all_three_are_supported_at_p_0_0005():
    strong = evaluate(make(8, {"static": 0.08, "uniform_parents": 0.08, "offline_large": 0.05}, sd=0.005))
    assert strong.look == "interim" and all(t.p <= 0.0005 for t in strong.tests)
    assert strong.decision.startswith("stop") and strong.alpha == 0.0005
    assert verdicts(strong) == {"P1": "supported", "P2": "supported", "P3": "supported"}
    weaker = evaluate(make(8, {"static": 0.03, "uniform_parents": 0.08, "offline_large": 0.05}, sd=0.03, seed=3))
    assert weaker.look == "interim" and weaker.tests[0].p > 0.0005
    assert weaker.decision.startswith("continue to K = 16")
    # P2 would be supported at the final alpha, yet an interim that goes on gives no verdict at all
    assert weaker.tests[1].p_holm < FINAL_ALPHA and weaker.tests[1].lo > 0
    assert set(verdicts(weaker).values()) == {"none at the interim"}


def test_holm_runs_over_p1_to_p3_alone_with_p3_tested_against_its_margin():
    data = make(16, {"static": 0.02, "uniform_parents": 0.01, "offline_large": 0.0}, sd=0.02, seed=5)
    data["single_layer"] = data["static"]  # another arm never joins the family
    look = evaluate(data)
    d = {r: [data["rods"][k] - data[r][k] for k in range(16)] for r in ("static", "uniform_parents", "offline_large")}
    ps = {
        "P1": paired_t(d["static"], alternative="greater").p,
        "P2": paired_t(d["uniform_parents"], alternative="greater").p,
        "P3": paired_t([x + 0.03 for x in d["offline_large"]], alternative="greater").p,
    }
    expected = holm(ps, ps)
    assert [t.p_holm for t in look.tests] == pytest.approx([expected[n] for n in ("P1", "P2", "P3")])


def test_a_look_between_the_planned_ones_is_descriptive_and_missing_arms_are_not_evaluable():
    look = evaluate(make(5, {"static": 0.05, "uniform_parents": 0.05, "offline_large": 0.0}, sd=0.01))
    assert look.look == "partial" and "not a planned look" in look.decision
    assert set(verdicts(look).values()) == {"none (descriptive)"} and look.tests[0].lo > 0
    with pytest.raises(ValueError, match="give one of interim, final"):
        evaluate(make(5, {"static": 0.05}, sd=0.01), look="last")
    only = evaluate({"rods": {0: 0.1, 1: 0.2}, "static": {0: 0.0, 1: 0.1}})
    assert verdicts(only)["P2"] == "not evaluable" and only.k == 0


def test_areas_read_each_runs_greedy_h1_evaluations_from_its_summary():
    evals = [
        {"step": 0, "set": "H1", "progress": 0.5},
        {"step": 10, "set": "H1", "progress": 0.7},
        {"step": 10, "set": "H1", "progress": 0.1, "sampled": True},
        {"step": 10, "set": "H1b", "progress": 0.9},
    ]
    got = areas([{"arm": "rods", "replicate": 3, "evaluations": evals}])
    assert got == {"rods": {3: pytest.approx(0.2)}}


def test_a_sampled_set_is_read_from_its_sampled_scores_and_last_only_reads_the_last_minus_step_0():
    evals = [
        {"step": 0, "set": "H3", "progress": 0.1},
        {"step": 10, "set": "H3", "progress": 0.4},
        {"step": 20, "set": "H3", "progress": 0.2},
        {"step": 0, "set": "H1_sampled", "progress": 0.3, "sampled": True},
        {"step": 20, "set": "H1_sampled", "progress": 0.35, "sampled": True},
    ]
    run = [{"arm": "rods", "replicate": 0, "evaluations": evals}]
    assert areas(run, "H3") == {"rods": {0: pytest.approx(0.2)}}  # the mean of 0.3 and 0.1
    assert areas(run, "H3", last_only=True) == {"rods": {0: pytest.approx(0.1)}}
    assert areas(run, "H1_sampled") == {"rods": {0: pytest.approx(0.05)}}
    # a run scored at step 0 and its last checkpoint only is read the same either way
    two = [{"arm": "rods", "replicate": 0, "evaluations": [evals[0], evals[2]]}]
    assert areas(two, "H3") == areas(two, "H3", last_only=True) == areas(run, "H3", last_only=True)


def test_the_verdict_reads_the_summaries_folder_alone(tmp_path):
    data = make(8, {"static": 0.05, "uniform_parents": 0.05, "offline_small": 0.0, "offline_large": 0.0}, sd=0.01)
    for arm, per in data.items():
        for k, area in per.items():
            evals = [{"step": 0, "set": "H1", "progress": 0.5}, {"step": 10, "set": "H1", "progress": 0.5 + area}]
            (tmp_path / f"{arm}_r{k}.json").write_text(json.dumps({"arm": arm, "replicate": k, "evaluations": evals}))
    look, read = from_summaries(tmp_path)
    assert look.look == "interim" and look.k == 8 and len(read) == 40
    assert look.tests[0].diff == pytest.approx(sum(data["rods"][k] - data["static"][k] for k in range(8)) / 8)
    with pytest.raises(ValueError, match="no run summaries"):
        from_summaries(tmp_path / "empty")
    # runs past the interim: the count makes a partial look; the interim named reads replicates 0-7 alone
    for arm in data:
        evals = [{"step": 0, "set": "H1", "progress": 0.5}, {"step": 10, "set": "H1", "progress": 0.9}]
        (tmp_path / f"{arm}_r8.json").write_text(json.dumps({"arm": arm, "replicate": 8, "evaluations": evals}))
    assert from_summaries(tmp_path)[0].look == "partial" and from_summaries(tmp_path)[0].k == 9
    interim, read = from_summaries(tmp_path, "interim")
    assert interim.k == 8 and {s["replicate"] for s in read} == set(range(8))
    assert interim.tests[0].diff == pytest.approx(look.tests[0].diff)
    # eight complete replicates, but not the interim's: replicate 8 finished before 7 (two processes)
    (tmp_path / "rods_r7.json").unlink()
    count, _ = from_summaries(tmp_path)
    assert count.k == 8 and count.look == "partial" and "none (descriptive)" in verdicts(count).values()
    named, _ = from_summaries(tmp_path, "interim")
    assert named.look == "partial" and "[7] are not complete" in named.decision
    # two summaries of one arm in one replicate are an error, never one read for the other
    (tmp_path / "rods_r8_again.json").write_text(json.dumps({"arm": "rods", "replicate": 8, "run": "x"}))
    with pytest.raises(ValueError, match="two summaries of rods in replicate 8"):
        from_summaries(tmp_path)


def test_a_look_reads_its_own_replicates_once_every_one_of_them_is_complete():
    eight = set(range(8))
    assert planned_look(eight) == ("interim", list(range(8)), "")
    assert planned_look(eight | {8}) == ("partial", list(range(9)), "")
    assert planned_look(eight | {8}, "interim") == ("interim", list(range(8)), "")
    assert planned_look(eight - {7} | {8}) == ("partial", [0, 1, 2, 3, 4, 5, 6, 8], "")
    look, reads, why = planned_look(eight - {7} | {8}, "interim")
    assert look == "partial" and reads == [0, 1, 2, 3, 4, 5, 6, 8] and "[7] are not complete" in why
    assert planned_look(set(range(16))) == ("final", list(range(16)), "")
    assert planned_look(set(range(16)) - {3}, "final")[0] == "partial"
    assert (
        planned_look(eight, "final")[2]
        == "the final look reads replicates 0-15, and [8, 9, 10, 11, 12, 13, 14, 15] are not complete"
    )
    with pytest.raises(ValueError, match="give one of interim, final"):
        planned_look(eight, "last")


@pytest.mark.parametrize(
    "fall_at, expected",
    [(None, (200, None)), (60, (90, 60)), (20, (60, 20)), (150, (200, 150))],
)
def test_the_run_length_follows_static_depletion_in_the_pilot(fall_at, expected):
    def shares(offset):  # 0.6 until fall_at, then 0.4 (a fall of 0.2): the rolling mean crosses 0.15 at fall_at
        return [0.6 + offset if fall_at is None or s < fall_at - 7 else 0.4 + offset for s in range(1, 201)]

    assert run_length([shares(0.01), shares(-0.01)]) == expected


def test_the_pilot_length_reads_statics_shares_from_the_summaries(tmp_path):
    per_step = {"boundary/informative_share": [0.6] * 12 + [0.4] * 188}
    for k in (0, 1):
        (tmp_path / f"static_r{k}.json").write_text(
            json.dumps({"arm": "static", "run": f"static_r{k}", "steps": {"per_step": per_step}})
        )
    (tmp_path / "rods_r0.json").write_text(json.dumps({"arm": "rods", "run": "rods_r0", "steps": {"per_step": {}}}))
    got = length_from_summaries(tmp_path)
    assert got == {"L": 60, "depletion_step": 20, "runs": ["static_r0", "static_r1"], "reached": True,
                   "runs_all": ["rods_r0", "static_r0", "static_r1"]}  # fmt: skip


def summary(arm: str, k: int, per_task: dict[int, dict[str, float]], nearest: dict[str, float]) -> dict:
    """A run summary with greedy H1 evaluations per task and its audit's nearest item similarity per H1 task."""
    evals = [{"step": s, "set": "H1", "progress": sum(p.values()) / len(p), "per_task": p} for s, p in per_task.items()]
    audit = {"H1": {"nearest": {t: [v, v] for t, v in nearest.items()}}}
    return {"arm": arm, "replicate": k, "evaluations": evals, "audit": audit}


def test_the_far_task_outcome_keeps_the_tasks_below_0_8_in_both_runs_of_a_pair():
    # t1 is near training in rods' run, t3 in static's: only t2 is far in both, and only its rise counts
    rods = summary("rods", 0, {0: {"t1": 0.0, "t2": 0.2, "t3": 0.5}, 10: {"t1": 1.0, "t2": 0.6, "t3": 0.5}},
                   {"t1": 0.9, "t2": 0.3, "t3": 0.1})  # fmt: skip
    static = summary("static", 0, {0: {"t1": 0.0, "t2": 0.2, "t3": 0.5}, 10: {"t1": 0.0, "t2": 0.3, "t3": 1.0}},
                     {"t1": 0.5, "t2": 0.3, "t3": 0.85})  # fmt: skip
    got = far_task_diffs([rods, static])
    assert got["P1"] == [pytest.approx(0.4 - 0.1)]
    assert got["P2"] == [] and got["P3"] == []  # no uniform_parents or offline_large run in replicate 0
    # without the audit (a run summarised before it existed) the pair is left out, not guessed
    assert far_task_diffs([{**rods, "audit": {}}, static])["P1"] == []
    lines = "\n".join(far_task_markdown([rods, static]))
    assert "| P1: rods vs static | 1 | +0.3000 | — |" in lines
