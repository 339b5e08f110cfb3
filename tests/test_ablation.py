"""The ablation table and its verdicts (rods_lab.experiments.ablation), and the arms of `rods bench paper` (rods_lab.experiments.arms)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from rods_lab.experiments.ablation import ablation_table, comparisons, landing_by_run, markdown_table
from rods_lab.experiments.arms import (
    ABLATIONS,
    arm_overrides,
    estimate_s,
    is_complete,
    measured_s,
    parse_arms,
    plan_arms,
)


def _runs(values: dict[str, list[tuple[float, float]]]) -> pd.DataFrame:
    """run table rows: arm -> [(informative share last half, final progress), ...] per run."""
    rows = [
        {"run": f"{arm}_r{k}", "method": arm, "informative_share_last_half": s, "final_progress": p}
        for arm, per in values.items()
        for k, (s, p) in enumerate(per)
    ]
    return pd.DataFrame(rows)


def _landing(firsts: dict[str, list[str | None]]) -> pd.DataFrame:
    rows = [
        {"run": run, "variant_id": f"v{i}", "first_region": r} for run, rs in firsts.items() for i, r in enumerate(rs)
    ]
    return pd.DataFrame(rows)


def test_landing_by_run_counts_only_probed_variants():
    lb = landing_by_run(_landing({"rods_r0": ["boundary", "hard", None, "boundary"], "rods_r1": [None]}))
    assert lb.to_dict("records") == [{"run": "rods_r0", "probed": 3, "landing_share": pytest.approx(2 / 3)}]


def test_ablation_table_has_one_row_per_arm_with_intervals_and_the_losses_stated():
    runs = _runs(
        {
            "rods": [(0.5, 0.40), (0.55, 0.42), (0.6, 0.41)],
            "static": [(0.2, 0.40), (0.25, 0.43), (0.22, 0.41)],
            "uniform_parents": [(0.5, 0.41), (0.58, 0.40), (0.55, 0.43)],
        }
    )
    landing = _landing({"rods_r0": ["boundary", "hard"], "rods_r1": ["boundary"], "uniform_parents_r0": ["hard"]})
    table = ablation_table(runs, landing).set_index("arm")
    assert list(table.index) == ["rods", "static", "uniform_parents"]  # rods, static, then the ablations
    assert table.at["rods", "informative_share_last_half"] == pytest.approx(0.55)
    assert table.at["rods", "informative_share_last_half_ci95"] > 0 and table.at["rods", "runs"] == 3
    assert table.at["rods", "landing_share"] == pytest.approx(0.75) and table.at["rods", "landing_share_n"] == 2
    assert math.isnan(table.at["static", "landing_share"])
    comps = {(c["other"], c["metric"]): c["verdict"] for c in comparisons(runs, landing, boots=500)}
    assert comps[("static", "informative_share_last_half")] == "beats"
    assert comps[("static", "final_progress")] == "does not beat"
    assert comps[("uniform_parents", "informative_share_last_half")] == "does not beat"
    text = "\n".join(markdown_table(ablation_table(runs, landing), comparisons(runs, landing, boots=500)))
    assert "- rods beats static on informative_share_last_half" in text
    assert "- **rods does not beat static on final_progress**" in text
    assert "- **rods does not beat uniform_parents on informative_share_last_half**" in text


def test_arms_parse_methods_and_ablations_and_refuse_unknown_names():
    assert parse_arms("rods, static,single_layer,rods") == ["rods", "static", "single_layer"]
    with pytest.raises(ValueError, match="unknown \\['grpo'\\]"):
        parse_arms("rods,grpo")
    assert arm_overrides("static") == ("static", {})
    assert arm_overrides("uniform_parents") == ("rods", {"buffer.synth_parents": "uniform"})


def test_plan_arms_names_each_run_after_its_arm_with_the_arm_flag_set_and_shared_seeds(tmp_path):
    plans = plan_arms(Path("configs/demo-cpu.yaml"), tmp_path, ["rods", "static", "paper_streaks"], 2, 96, 2, {})
    assert [p[0] for p in plans] == [
        "rods_r0", "static_r0", "paper_streaks_r0", "rods_r1", "static_r1", "paper_streaks_r1",
    ]  # fmt: skip
    by = {p[0]: p[3] for p in plans}
    assert by["paper_streaks_r1"].name == "paper_streaks" and by["paper_streaks_r1"].method == "rods"
    assert by["paper_streaks_r1"].buffer.mastered_streak == 2 and by["rods_r1"].buffer.mastered_streak == 1
    assert by["static_r1"].seed == by["paper_streaks_r1"].seed == by["rods_r0"].seed + 1


@pytest.mark.parametrize("arm", sorted(ABLATIONS))
def test_every_ablation_is_a_valid_flag_of_the_run_config(arm, tmp_path):
    (plan,) = plan_arms(Path("configs/demo-cpu.yaml"), tmp_path, [arm], 1, 48, 1, {})
    assert plan[3].method == "rods" and plan[3].name == arm


def test_estimate_grows_with_runs_steps_and_evaluations_and_is_complete_reads_the_log(tmp_path):
    one = estimate_s(["rods", "static"], 1, 10, 2, 24)
    assert estimate_s(["rods", "static"], 2, 10, 2, 24) == pytest.approx(2 * one)
    assert estimate_s(["rods", "static"], 1, 20, 2, 24) > one and estimate_s(["rods", "static"], 1, 10, 5, 24) > one
    assert not is_complete(tmp_path / "missing", 3)


def test_a_folder_estimates_from_its_own_whole_runs_of_the_same_arm_first():
    runs = [
        {"run": "rods_r0", "arm": "rods", "wall_s": 6000.0, "score_s": 2000.0, "resumed_from": None},
        {"run": "static_r0", "arm": "static", "wall_s": 5000.0, "resumed_from": None},
        {"run": "static_r1", "arm": "static", "wall_s": 900.0, "resumed_from": 130},  # only its last part
        {"run": "rods_r1", "arm": "rods", "status": "not run"},
    ]
    assert measured_s(runs, "rods") == 8000.0 and measured_s(runs, "static") == 5000.0
    assert measured_s(runs, "offline_small") == pytest.approx(6500.0)  # no run of that arm: any whole run
    assert measured_s(runs[2:], "static") is None  # nothing run whole here: the printed figures are used


def test_comparisons_with_fewer_than_three_runs_a_side_are_not_decided():
    runs = _runs({"rods": [(0.5, 0.4), (0.6, 0.5)], "static": [(0.1, 0.1), (0.2, 0.1)]})
    said = {c["metric"]: c["verdict"] for c in comparisons(runs, _landing({}), boots=200)}
    assert said["informative_share_last_half"] == said["final_progress"] == "cannot be compared (n < 3) with"
    assert said["landing_share"] == "not measured"


def test_a_restart_on_a_folder_of_another_design_is_refused_before_any_run(tmp_path):
    import json

    from rods_lab.experiments.arms import run

    (tmp_path / "manifest.json").write_text(json.dumps({"settings": {"budget": 96, "max_steps": 2}, "runs": []}))
    with pytest.raises(ValueError, match="another design \\(budget, config, sets, max_steps"):
        run(48, ["static"], 1, Path("configs/demo-cpu.yaml"), 1, out=tmp_path, log=lambda *_: None)
    assert not (tmp_path / "runs").exists()
