"""The pool-replicates report from synthetic run summaries whose figures are known: which replicates count, the
secondary outcomes' numbers, the Markdown and the files it writes."""

from __future__ import annotations

import json
import math

import pytest

from rods_lab.experiments.pool_criteria import ARMS, areas, complete, from_summaries, set_aside
from rods_lab.experiments.pool_report import reach_step, report_markdown, secondaries, share_halves, write

GAIN = {"static": 0.00, "rods": 0.04, "uniform_parents": 0.02, "offline_small": 0.01, "offline_large": 0.03}
OFFLINE = {"offline_small": 1, "offline_large": 20}  # the offline pools' variants: this x rods' M (large 7 short)


def summary(arm: str, k: int, fall: float = 0.2) -> dict:
    """A run of `arm` in replicate k: H1 rises linearly to its arm's gain (+ k/100) over 3 evaluations; static's
    informative share falls by `fall` + k/10 from its first half to its last, the others' stays at 0.5."""
    gain = GAIN[arm] + k / 100
    h1 = [{"set": "H1", "step": st, "progress": 0.1 + gain * st / 12, "per_task": {}} for st in (0, 6, 12)]
    h1b = [{"set": "H1b", "step": st, "progress": 0.2 + gain * st / 24} for st in (0, 12)]
    h1s = [{"set": "H1_sampled", "step": st, "progress": 0.3 + gain * st / 12, "sampled": True} for st in (0, 12)]
    h3 = [{"set": "H3", "step": st, "progress": 0.05 + gain * (st == 12)} for st in (0, 6, 12)]  # area gain / 2
    drop = fall + k / 10 if arm == "static" else 0.0
    shares = [0.5] * 10 + [0.5 - drop] * 10
    return {
        "run": f"{arm}_r{k}", "arm": arm, "replicate": k, "evaluations": h1 + h1b + h1s + h3, "pool": list(range(16)),
        "steps": {"per_step": {"boundary/informative_share": shares}},
        "heldout_sets": {"H1": {"n": 120 - k}, "H1b": {"n": 20}},
        "pool_sizes": {"seeds": 16, "distinct_played": 16 + 10 * GAIN[arm] * 100, "variants_played": 60 + 10 * k,
                       "last": {"active": 16 + OFFLINE.get(arm, 0) * (60 + 10 * k) - (arm == "offline_large") * 7}},
        "audit": {"H1": {"items": {"n": 10, "at_or_above": k, "mean": 0.5, "threshold": 0.8,
                                   "quantiles": {"0.5": 0.4 + k / 10, "1.0": 1.0}},
                         "names": {"n": 10, "at_or_above": 10, "mean": 1.0, "threshold": 0.8}, "nearest": {}}},
        "code": {"commit": "x", "dirty": False}, "cpu_kernels": "AVX512" if k else "AVX2",
        "binding": {"offer_budget": k}, "wall_s": 600.0 + k if k != 1 else None, "score_s": 100.0,
        "offline": {"heldout_collisions_excluded": k} if arm.startswith("offline") and k != 1 else None,
    }  # fmt: skip


def written(folder, summaries: list[dict]):
    """`folder` holding each summary as <run id>.json, as `rods bench paper --summaries` writes them."""
    folder.mkdir()
    for s in summaries:
        (folder / f"{s['run']}.json").write_text(json.dumps(s))
    return folder


@pytest.fixture
def runs() -> list[dict]:
    return [summary(arm, k) for k in range(3) for arm in ARMS] + [summary("static", 3), summary("rods", 3)]


def test_only_replicates_with_every_arm_count(runs):
    kept, left = complete(runs)
    assert left == [3]
    assert {s["replicate"] for s in kept} == {0, 1, 2} and len(kept) == 15


def test_reach_step_is_the_first_evaluation_at_the_gain():
    assert reach_step({0: 0.1, 6: 0.12, 12: 0.131, 18: 0.2}) == 12
    assert reach_step({0: 0.1, 6: 0.12}) is None
    assert reach_step({6: 0.5}) is None


def test_secondary_outcomes_have_the_known_values(runs):
    kept, _ = complete(runs)
    sec = secondaries(kept, per_step=48)
    nondeg = {r["arm"]: r for r in sec["non_degradation"]}
    assert nondeg["rods"]["last - step 0"] == pytest.approx(0.04 + 0.01)  # mean over k of 0.04 + k/100
    assert nondeg["static"]["n"] == 3
    reach = {r["arm"]: r for r in sec["reach"]}
    assert reach["rods"]["reached"] == "3 of 3" and reach["rods"]["median trajectories (of those)"] == 12 * 48
    assert reach["static"]["reached"] == "0 of 3"  # static gains k/100 < 0.03
    h1b = {r["comparison"]: r for r in sec["paired"] if r["set"] == "H1b"}
    assert h1b["rods - static"]["mean"] == pytest.approx((0.04 * 12 / 24) / 1)  # area = gain/2, one evaluation
    paired = {(r["set"], r["comparison"]): r for r in sec["paired"]}
    assert paired["H1_sampled", "rods - static"]["n"] == 3  # read from its sampled scores
    assert paired["H1_sampled", "rods - static"]["mean"] == pytest.approx(0.04)
    assert paired["H3", "rods - static"]["mean"] == pytest.approx(0.04)  # last minus step 0, not the area (0.02)
    # static's last-half share is 0.5 - (0.2 + k/10): 0.3, 0.2, 0.1 -> mean 0.2; rods' 0.5: ratio 2.5
    assert sec["share_ratio"].ratio == pytest.approx(2.5) and sec["share_ratio"].n == 3
    dry = sec["dry_vs_gain"]
    # rods - static area is 0.04 * (mean of st/12 over 6, 12 = 0.75) for every replicate: no slope
    assert dry["rods_minus_static"] == pytest.approx([0.03] * 3)
    assert dry["slope"].slope == pytest.approx(0.0, abs=1e-12)


def test_share_halves():
    assert share_halves({"steps": {"per_step": {"boundary/informative_share": [1, None, 0.5, 0.5]}}}) == (0.5, 0.5)
    assert all(math.isnan(v) for v in share_halves({"steps": {"per_step": {}}}))


def test_the_report_names_sizes_tests_and_left_out_replicates(runs, tmp_path):
    md = report_markdown(runs, 48, ["figures/a.png"])
    assert "left out as incomplete: [3]" in md
    # replicate 0's kernels, whether its block counts, pool, held-out sizes, M, ...
    assert "| 0 | AVX2 | yes | 16 | 120 | 20 | 60 | 60 | 1193 |" in md
    assert "| 3 | AVX512 | no | 16 | 117 | 20 | 90 | — | — |" in md  # replicate 3 has no offline runs: shown as missing
    assert "in no test: replicate 3 on AVX512: static, rods (incomplete)" in md
    assert "| P1 | rods > static" in md and "partial look, K = 3" in md
    assert "rods / static 2.500" in md and "read at the partial look: [0, 1, 2]" in md
    # per platform: static's and rods' last-half shares and their ratio (AVX2: replicate 0; AVX512: 1 and 2)
    assert "| +0.3000 | +0.5000 | +1.6667 |" in md and "| +0.1500 | +0.5000 | +3.3333 |" in md
    path = write(runs, tmp_path, 48, png=False, log=lambda _m: None)
    assert path == tmp_path / "report.md" and "![figures/h1_vs_trajectories.json]" in path.read_text()
    # the audit: both measures, counts summed over replicates 0-2 (0 + 1 + 2 of 30), quantiles as means over them
    assert "| rods | H1 | calls' items | 3 | 3 of 30 | +0.5000 | +0.5000 | +1.0000 |" in md
    assert "| rods | H1 | function names | 3 | 30 of 30 | +1.0000 |" in md
    assert "| 2 | 2 of 10 | 2 of 10 | 2 of 10 | 2 of 10 | 2 of 10 |" in md  # per replicate, every arm
    # how the runs ran: binding events summed, replicate 1's run has no times, platforms named with their counts
    assert "| rods | 3 | 0 | 3 | — | 2 | 601 | 100 | — |" in md
    assert "| offline_large | 3 | 0 | 3 | 2 (2 of 3 runs) | 2 |" in md  # replicate 1's summary holds no count
    assert "Platforms: AVX2: 5 runs; AVX512: 12 runs." in md
    distinct = json.loads((tmp_path / "figures" / "h1_area_vs_distinct.json").read_text())
    assert sum(t.get("mode") == "lines" for t in distinct["data"]) == 3  # each complete replicate's runs joined
    fig = json.loads((tmp_path / "figures" / "h1_diff_vs_static.json").read_text())
    assert {t["name"] for t in fig["data"] if "95%" not in t["name"]} == set(ARMS) - {"static"}


def test_the_commands_refuse_two_summaries_of_one_run_and_an_unknown_look(runs, tmp_path):
    from tests.door_helpers import files, invoke, refused

    folder = written(tmp_path / "runs", runs)
    refused(invoke("bench", "pool-criteria", folder, "--look", "last"), "look 'last'", "interim, final")
    (folder / "rods_r0_copy.json").write_text(json.dumps({**runs[1], "run": "rods_r0_copy"}))
    before = files(tmp_path)
    refused(invoke("bench", "pool-report", folder, "--no-png"), "two summaries of rods in replicate 0")
    refused(invoke("bench", "pool-criteria", folder), "two summaries of rods in replicate 0")
    assert files(tmp_path) == before  # no report, no figures half written


def on(kernels: str, model: str, s: dict) -> dict:
    return {**s, "cpu_kernels": kernels, "model_sha256": model}


def test_a_replicate_counts_through_its_first_complete_block(runs):
    # replicate 3 holds static and rods on AVX512 and every arm on AVX2 (another model): the AVX2 block counts
    avx2 = [on("AVX2", "m2", summary(arm, 3)) for arm in ARMS]
    kept, left = complete(runs + avx2)
    assert left == [] and len(kept) == 20
    assert {(s["arm"], s["cpu_kernels"]) for s in kept if s["replicate"] == 3} == {(a, "AVX2") for a in ARMS}
    assert set_aside(runs + avx2) == ["replicate 3 on AVX512: static, rods (incomplete)"]
    # a second complete block of replicate 0: the one read first counts, the other is named
    again = [on("AVX512", "m1", summary(arm, 0)) for arm in ARMS]
    first = complete(runs + again)[0]
    assert {s["cpu_kernels"] for s in first if s["replicate"] == 0} == {"AVX2"}
    assert set_aside(runs + again) == [
        "replicate 0 on AVX512: " + ", ".join(ARMS) + " (complete; another block of it counts)",
        "replicate 3 on AVX512: static, rods (incomplete)",
    ]
    assert {s["cpu_kernels"] for s in complete(again + runs)[0] if s["replicate"] == 0} == {"AVX512"}
    # one arm twice in one block is still an error; in two blocks it is not
    with pytest.raises(ValueError, match="two summaries of rods in replicate 3"):
        complete([*avx2, avx2[1]])


def test_a_set_that_holds_no_task_is_read_in_no_figure():
    empty = [{"set": "H1b", "step": st, "progress": 0.0, "n": 0} for st in (0, 6)]
    held = [{"set": "H1b", "step": st, "progress": 0.1 * st, "n": 20} for st in (0, 6)]
    runs = [{"arm": "rods", "replicate": 0, "evaluations": empty}, {"arm": "rods", "replicate": 1, "evaluations": held}]
    assert areas(runs, "H1b") == {"rods": {1: pytest.approx(0.6)}}


def test_the_folders_are_read_in_order_and_a_missing_one_is_refused(runs, tmp_path):
    from tests.door_helpers import files, invoke, refused

    old, new = tmp_path / "runs", tmp_path / "runs-avx2"
    written(old, runs)
    written(new, [on("AVX2", "m2", summary(arm, 3)) for arm in ARMS])
    assert from_summaries(old)[0].k == 3 and from_summaries([old, new])[0].k == 4
    with pytest.raises(ValueError, match="no such folder"):
        from_summaries([old, tmp_path / "runs-avx"])
    before = files(tmp_path)
    refused(invoke("bench", "pool-report", old, tmp_path / "runs-avx", "--no-png"), "runs-avx", "no such folder")
    refused(invoke("bench", "pool-criteria", old, tmp_path / "runs-avx"), "runs-avx", "no such folder")
    assert files(tmp_path) == before
    done = invoke("bench", "pool-report", old, new, "--no-png")
    assert done.exit_code == 0, done.output
    md = (tmp_path / "report.md").read_text()
    assert "summaries in [runs/](runs/), [runs-avx2/](runs-avx2/) by" in md
    assert "complete replicates (all of " in md and "[0, 1, 2, 3]; left out as incomplete: none" in md
    # per platform, in the order read: replicate 0 (AVX2 in runs/), 1 and 2 (AVX512), 3 (AVX2 in runs-avx2/);
    # rods - static is 0.04 x 0.75
    assert "| AVX2 (runs/) | 1 | +0.0300 | +0.0150 | +0.0075 |" in md and "| AVX512 (runs/) | 2 | +0.0300 |" in md
    assert "| AVX2 (runs-avx2/) | 1 | +0.0300 |" in md
    assert "Platforms: AVX2 (runs/): 5 runs; AVX512 (runs/): 12 runs; AVX2 (runs-avx2/): 5 runs." in md


def test_two_machines_with_one_kernel_set_and_two_models_stay_two_platforms(runs, tmp_path):
    # an Intel and an AMD machine both run AVX-512 kernels yet build two warm starts (design.md, Amendment 12)
    from tests.door_helpers import invoke

    xeon = [on("AVX512", "m3", summary(arm, 4)) for arm in ARMS] + [on("AVX512", "m3", summary("static", 5))]
    written(tmp_path / "runs", runs)
    written(tmp_path / "runs-xeon", xeon)
    done = invoke("bench", "pool-report", tmp_path / "runs", tmp_path / "runs-xeon", "--no-png")
    assert done.exit_code == 0, done.output
    md = (tmp_path / "report.md").read_text()
    assert "| AVX512 (runs/) | 2 |" in md and "| AVX512 (runs-xeon/) | 1 |" in md
    assert "| 4 | AVX512 (runs-xeon/) | yes |" in md
    assert (
        "in no test: replicate 3 on AVX512 (runs/): static, rods (incomplete); "
        "replicate 5 on AVX512 (runs-xeon/): static (incomplete)"
    ) in md
