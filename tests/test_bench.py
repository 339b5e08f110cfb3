"""Benchmark aggregation (rods_lab.results), the step-overhead statistics, and `rods bench curriculum`.

The synthetic runs are written with the real EventLog, so the tests go through the same Parquet
files and DuckDB queries as a training run's report.
"""

from __future__ import annotations

import json
import math
import statistics

import pytest
import yaml

from bench.step_overhead import overhead
from rods_core.statistics import t_interval
from rods_lab.results import (
    RUN_METRICS,
    discover_runs,
    goal_checks,
    load_experiment,
    load_runs,
    mean_curve,
    method_table,
    run_table,
    share_ratio,
    variance_ratio,
)
from storage.events import EventLog


def write_run(root, name, method, seed, info_shares, progress, var_rows, active=(3, 4, 5, 6)):
    """A finished run: config.yaml, 4 steps of 12 trajectories, evals at steps 0/2/4, task statistics."""
    run_dir = root / name
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(yaml.safe_dump({"method": method, "seed": seed, "name": name}))
    with EventLog(run_dir) as log:
        for i, share in enumerate(info_shares, start=1):
            log.append(
                "step",
                {
                    "step": i,
                    "wall_s": 1.0,
                    "train/trajectories": 12.0,
                    "boundary/informative_share": share,
                    "buffer/active": float(active[i - 1]),
                    "time/step_s": float(i),
                },
            )
        for step, p in zip((0, 2, 4), progress, strict=True):
            log.append(
                "eval",
                {
                    "step": step,
                    "split": "variants",
                    "accuracy": p / 2,
                    "progress": p,
                    "per_category": {},
                    "trajectories": step * 12,
                },
            )
        log.append(
            "task_stats",
            [
                {
                    "step": s,
                    "task_id": f"t{k}",
                    "n": 4,
                    "mean": 0.5,
                    "var": v,
                    "smoothed_mean": 0.5,
                    "smoothed_var": v,
                    "region": region,
                }
                for k, (s, region, v) in enumerate(var_rows)
            ],
        )
    return run_dir


@pytest.fixture
def bench_folder(tmp_path):
    root = tmp_path / "runs"
    # rods: informative share 0.2, 0.4 | 0.6, 0.8 (last half mean 0.7); boundary var (0.2*2 rows), others 0.05
    rods_vars = [(1, "boundary", 0.2), (1, "boundary", 0.2), (1, "mastered", 0.0), (2, "hard", 0.1)]
    write_run(root, "rods-r0", "rods", 0, [0.2, 0.4, 0.6, 0.8], [0.1, 0.3, 0.5], rods_vars)
    write_run(root, "rods-r1", "rods", 1, [0.2, 0.4, 0.5, 0.7], [0.1, 0.2, 0.3], rods_vars)
    static_vars = [(1, "boundary", 0.1), (1, "hard", 0.1)]
    write_run(root, "static-r0", "static", 0, [0.3, 0.3, 0.2, 0.2], [0.1, 0.2, 0.2], static_vars, active=(6, 6, 6, 6))
    write_run(root, "static-r1", "static", 1, [0.3, 0.3, 0.4, 0.2], [0.1, 0.1, 0.4], static_vars, active=(6, 6, 6, 6))
    return root


def test_t_interval_matches_student_t():
    mean, half, n = t_interval([1.0, 3.0])
    assert (mean, n) == (2.0, 2)
    assert half == pytest.approx(12.7062 * statistics.stdev([1.0, 3.0]) / math.sqrt(2), rel=1e-5)
    assert t_interval([0.4])[1] is None  # one repeat: no interval
    assert t_interval([float("nan")])[2] == 0


def test_runs_are_discovered_and_summarised(bench_folder):
    refs = discover_runs(bench_folder)
    assert {(r.run, r.method, r.seed) for r in refs} == {
        ("rods-r0", "rods", 0),
        ("rods-r1", "rods", 1),
        ("static-r0", "static", 0),
        ("static-r1", "static", 1),
    }
    frames = load_runs(refs)
    runs = run_table(frames).set_index("run")
    assert runs.loc["rods-r0", "informative_share_last_half"] == pytest.approx(0.7)  # steps 3, 4 of 4
    assert runs.loc["static-r0", "informative_share_last_half"] == pytest.approx(0.2)
    assert runs.loc["rods-r0", "variance_ratio"] == pytest.approx(0.2 / 0.05)  # others pooled: (0 + 0.1) / 2
    assert runs.loc["static-r0", "variance_ratio"] == pytest.approx(1.0)
    assert runs.loc["rods-r0", "final_progress"] == pytest.approx(0.5)
    assert runs.loc["rods-r0", "mean_progress"] == pytest.approx(0.4)  # evals after step 0
    assert runs.loc["rods-r0", "trajectories"] == 48
    assert runs.loc["rods-r0", "final_pool_active"] == 6
    assert runs.loc["rods-r0", "median_step_s"] == pytest.approx(2.5)


def test_method_table_curves_and_goals(bench_folder):
    frames, runs, methods = load_experiment(bench_folder.parent)  # a bench folder holds runs/
    assert len(runs) == 4
    row = methods[(methods.method == "rods") & (methods.metric == "final_progress")].iloc[0]
    assert row["mean"] == pytest.approx(0.4) and row["n"] == 2
    assert row["ci95"] == pytest.approx(12.7062 * statistics.stdev([0.5, 0.3]) / math.sqrt(2), rel=1e-5)
    curve = mean_curve(frames.evals, "progress")
    at4 = curve[(curve.method == "rods") & (curve.step == 4)].iloc[0]
    assert (at4.trajectories, at4.progress) == (48, pytest.approx(0.4))
    ratio = share_ratio(frames)
    assert ratio[0] == pytest.approx(0.65 / 0.25) and ratio[1] <= ratio[0] <= ratio[2]
    goals = {g["goal"].split(":")[0]: g for g in goal_checks(methods, {"pct": 7.5, "ci95": [6.0, 9.0]}, ratio)}
    info = goals["informative share (last half)"]
    assert info["measured"] == pytest.approx(0.65 / 0.25) and info["met"] is (ratio[1] > 1.0)
    assert goals["rods boundary / other-region variance"]["met"] is True
    assert goals["held-out progress at equal trajectories"]["measured"] == pytest.approx(0.4 - 0.3)
    assert goals["rods step time over a plain TRL GRPO step (%)"]["met"] is False  # all of the interval > 5%
    straddling = goal_checks(methods, {"pct": 3.0, "ci95": [-20.0, 30.0]})[-1]
    assert straddling["met"] is None  # noise decides nothing


def test_variance_ratio_without_a_boundary_region_is_not_a_number():
    import pandas as pd

    df = pd.DataFrame({"step": [1], "region": ["hard"], "mean_var": [0.1], "n": [3]})
    assert math.isnan(variance_ratio(df))
    goals = goal_checks(
        method_table(
            pd.DataFrame(
                [{"run": "a", "method": "rods", "seed": 0, "steps": 1, "variance_ratio": float("nan")}]
            ).reindex(columns=["run", "method", "seed", "steps", *RUN_METRICS])
        )
    )
    assert [g["met"] for g in goals if g["goal"].startswith("rods boundary")] == [None]


def test_overhead_is_the_ratio_of_total_step_time_with_a_paired_interval():
    # Steps of very different lengths, rods exactly 10% slower on each: only a paired resample (the same
    # steps drawn for both arms) gives 10% on every draw; resampling the arms apart would spread widely.
    plain = [5.0, 40.0, 12.0, 25.0, 8.0, 33.0, 17.0, 50.0]
    for centre in (statistics.fmean, statistics.median):
        pct, (lo, hi) = overhead([p * 1.1 for p in plain], plain, boots=300, centre=centre)
        assert pct == pytest.approx(10.0) and lo == pytest.approx(10.0) and hi == pytest.approx(10.0)
    # The point is the ratio of totals (22.3 / 15), not the mean of per-step ratios (~1.98x) nor the
    # ratio of medians (3.3 / 3.0), which sets one arm's third step against the other's third-largest
    rods, plain = [3.0, 6.0, 3.3, 1.0, 9.0], [1.0, 2.0, 3.0, 4.0, 5.0]
    assert overhead(rods, plain, boots=50)[0] == pytest.approx(100 * (22.3 / 15 - 1))
    assert overhead(rods, plain, boots=50, centre=statistics.median)[0] == pytest.approx(10.0)


def test_overhead_interval_covers_the_point_and_narrows_with_more_steps():
    import random

    rng = random.Random(1)

    def arms(n: int) -> tuple[list[float], list[float]]:
        plain = [rng.uniform(10, 20) for _ in range(n)]
        return [p * rng.uniform(1.0, 1.2) for p in plain], plain

    pct, (lo, hi) = overhead(*arms(12), boots=500)
    assert lo < pct < hi and 0.0 < lo and hi < 20.0  # every per-step ratio lies in 0-20%
    _, (lo_many, hi_many) = overhead(*arms(200), boots=300)
    assert hi_many - lo_many < (hi - lo) / 2


def test_buffer_bench_reports_a_share_only_of_a_measured_step(tmp_path, capsys):
    from bench import buffer_bench

    write_run(tmp_path, "r", "rods", 0, [0.5, 0.5, 0.5, 0.5], [0.1, 0.2, 0.3], [])  # steps of 1, 2, 3, 4 s
    assert buffer_bench.measured_step_s(tmp_path / "r") == 2.5
    plain = buffer_bench.run(steps=3)
    assert "share_of_measured_step_pct" not in plain["detector_only_32x16"] and "not checked" in plain["goal"]
    measured = buffer_bench.run(steps=3, step_s=2.5, measured_in="r")["detector_only_32x16"]
    assert measured["share_of_measured_step_pct"] == pytest.approx(100 * measured["ms_mean"] / 2500, abs=1e-4)
    with pytest.raises(SystemExit) as e:
        buffer_bench.main(["--run", str(tmp_path / "nothing"), "--steps", "1"])
    assert e.value.code == 2 and "nothing: no event log" in capsys.readouterr().err


@pytest.mark.slow
def test_bench_curriculum_runs_two_methods_and_writes_its_report(tmp_path, tiny_model_dir):
    from typer.testing import CliRunner

    from rods_lab.cli import app

    out = tmp_path / "bench"
    args = [
        "bench",
        "curriculum",
        "--budget",
        "8",
        "--methods",
        "rods,static",
        "--evals",
        "1",
        "--out",
        str(out),
        "--set",
        f"model.path={tiny_model_dir}",
        "--set",
        "seeds.limit=6",
        "--set",
        "grpo.num_generations=2",
        "--set",
        "grpo.tasks_per_step=2",
        "--set",
        "eval.limit=2",
        "--set",
        "eval.split=train",
        "--set",
        "episode.sampling.max_new_tokens=16",
        "--set",
        "episode.max_steps_per_turn=1",
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert [m["status"] for m in summary["runs_meta"]] == ["finished", "finished"]
    assert {r["method"] for r in summary["runs"]} == {"rods", "static"}
    assert all(r["trajectories"] == 8 for r in summary["runs"])  # 2 steps x 2 tasks x 2 rollouts each
    assert (out / "summary.md").read_text().startswith("# Curriculum benchmark")
    for fig in ("progress", "accuracy", "informative_share", "pool_size", "variance_ratio"):
        assert (out / f"{fig}.html").exists()
    assert (out / "runs" / "rods_r0" / "events").is_dir() and (out / "workspace" / "control.sqlite").exists()


def test_bench_curriculum_rejects_an_unknown_method(tmp_path):
    from typer.testing import CliRunner

    from rods_lab.cli import app

    result = CliRunner().invoke(
        app, ["bench", "curriculum", "--budget", "8", "--methods", "rods,grpo++", "--out", str(tmp_path / "x")]
    )
    assert result.exit_code == 2
    assert "grpo++" in result.output


def test_the_share_ratio_pairs_run_levels_by_seed_and_more_steps_do_not_narrow_it():
    """The run is the unit: each run's last-half mean is its level, paired by seed (Fieller), so a longer run (more
    autocorrelated steps) does not shrink the interval the way resampling steps as independent draws did."""
    import pandas as pd

    from rods_lab.results import Frames

    def frames(repeat: int) -> Frames:
        shares = {"rods": [[0.6, 0.7], [0.4, 0.5], [0.8, 0.8]], "static": [[0.3, 0.3], [0.2, 0.3], [0.4, 0.4]]}
        rows = [{"run": f"{m}_r{seed}", "method": m, "seed": seed, "step": i + 1, "informative_share": v}
                for m, runs in shares.items() for seed, (first, last) in enumerate(runs)
                for i, v in enumerate([first] * repeat + [last] * repeat)]  # fmt: skip
        empty = pd.DataFrame()
        return Frames(empty, pd.DataFrame(rows), empty, empty)

    point, lo, hi = share_ratio(frames(2))
    assert point == pytest.approx((0.7 + 0.5 + 0.8) / (0.3 + 0.3 + 0.4)) and lo < point < hi
    assert share_ratio(frames(50)) == pytest.approx((point, lo, hi))  # the same run levels: the same interval


def test_variant_landing_reads_each_variants_first_probe(tmp_path):
    from rods_lab.results import landing_table, variant_landing
    from storage.events import EventLog
    from storage.reader import RunReader

    log = EventLog(tmp_path)
    variant = {"parent_id": "p", "stages": [], "reason": "accepted", "task": None}
    log.append(
        "variant",
        [
            {"step": 1, "variant_id": "a", "accepted": True, "distance": 1, **variant},
            {"step": 1, "variant_id": "b", "accepted": True, "distance": 3, **variant},
            {"step": 2, "variant_id": "c", "accepted": True, "distance": 1, **variant},  # never probed
            {"step": 2, "variant_id": "p_rejected0", "accepted": False, "distance": None, **variant},
        ],
    )
    stats = {"n": 4, "mean": 0.5, "var": 0.1, "smoothed_mean": 0.5, "smoothed_var": 0.1}
    log.append(
        "task_stats",
        [
            {"step": 2, "task_id": "a", "region": "boundary", **stats},
            {"step": 3, "task_id": "a", "region": "hard", **stats},  # later probes do not count
            {"step": 3, "task_id": "b", "region": "hard", **stats},
            {"step": 3, "task_id": "p", "region": "boundary", **stats},  # a seed, not a variant
        ],
    )
    log.flush()
    landing = variant_landing(RunReader(tmp_path)).assign(method="rods")
    first = landing.set_index("variant_id").first_region
    assert first.loc[["a", "b"]].tolist() == ["boundary", "hard"] and first.isna().loc["c"]
    table = landing_table(landing).set_index("distance")
    assert table.loc["all", "probed"] == 2 and table.loc["all", "boundary_share"] == 0.5
    assert table.loc[1, "boundary_share"] == 1.0 and table.loc[3, "boundary_share"] == 0.0


def test_findings_tell_an_unrecorded_run_from_a_bad_exit_after_every_step():
    import pandas as pd

    from rods_lab.experiments.curriculum_report import findings

    settings = {"methods": ["rods", "static"], "repeats": 1, "max_steps": 30}
    meta = [{"run": "rods_r0", "status": "failed (1)"}, {"run": "static_r0", "status": "failed (1)"}]
    runs = pd.DataFrame({"run": ["rods_r0", "static_r0"], "steps": [30, 12], "informative_share_last_half": [0.5, 0.4]})
    lines = findings([], runs, settings, meta)
    assert any(line.startswith("- **INCOMPLETE**") and "static_r0" in line and "rods_r0" not in line for line in lines)
    assert any(line.startswith("- **NOTE** — rods_r0: every step was recorded") for line in lines)


def _experiment(folder, seeds, shares, extra=None):
    """A finished `rods bench curriculum` folder: manifest + runs r0.. of the methods in `shares` with the given
    seeds; `extra` adds settings to every run's config.yaml."""
    runs = []
    for k, seed in enumerate(seeds):
        for method in shares:
            name = f"{method}_r{k}"
            write_run(folder / "runs", name, method, seed, shares[method][k], [0.1, 0.2, 0.3], [(1, "boundary", 0.1)])
            if extra:
                cfg = folder / "runs" / name / "config.yaml"
                cfg.write_text(yaml.safe_dump({**yaml.safe_load(cfg.read_text()), **extra}))
            runs.append({"run": name, "method": method, "seed": seed, "status": "finished", "wall_s": 10.0,
                         "run_dir": str(folder / "runs" / name), "log": "", "log_tail": []})  # fmt: skip
    settings = {"config": "configs/demo-cpu.yaml", "methods": list(shares), "budget": 48, "max_steps": 4,
                "eval_every": 2, "trajectories_per_step": 12, "sets": {"seed": seeds[0]}, "repeats": len(seeds),
                "wall_s": 20.0 * len(seeds)}  # fmt: skip
    (folder / "manifest.json").write_text(json.dumps({"settings": settings, "runs": runs}))
    return folder


def test_pooling_two_experiments_of_one_design_gives_one_experiment_of_their_repeats(tmp_path):
    from rods_lab.experiments.runner import pool_runs

    a = _experiment(tmp_path / "a", [0], {"rods": [[0.2, 0.4, 0.6, 0.8]], "static": [[0.3, 0.3, 0.2, 0.2]]})
    b = _experiment(tmp_path / "b", [1, 2], {"rods": [[0.2, 0.4, 0.5, 0.7], [0.1, 0.1, 0.9, 0.9]],
                                             "static": [[0.3, 0.3, 0.4, 0.2], [0.5, 0.5, 0.5, 0.5]]})  # fmt: skip
    settings, meta = pool_runs([a, b], tmp_path / "pooled")
    assert settings["repeats"] == 3 and settings["wall_s"] == 60.0 and settings["sets"] == {}
    assert [m["run"] for m in meta] == ["rods_r0", "static_r0", "rods_r1", "static_r1", "rods_r2", "static_r2"]
    assert meta[4]["pooled_from"] == f"{b}/runs/rods_r1"
    frames, runs, _ = load_experiment(tmp_path / "pooled")
    assert sorted(runs.run) == sorted(m["run"] for m in meta)
    # the pooled ratio is that of the union of the runs: rods last halves 0.7, 0.6, 0.9; static 0.2, 0.3, 0.5
    assert math.isclose(share_ratio(frames)[0], (0.7 + 0.6 + 0.9) / (0.2 + 0.3 + 0.5))
    manifest = json.loads((tmp_path / "pooled" / "manifest.json").read_text())
    assert manifest["settings"]["pooled_from"] == [str(a), str(b)]


def test_pooling_refuses_a_seed_used_twice_another_design_and_a_used_folder(tmp_path):
    from rods_lab.experiments.runner import pool_runs

    shares = {"rods": [[0.5] * 4], "static": [[0.5] * 4]}
    a, b = _experiment(tmp_path / "a", [0], shares), _experiment(tmp_path / "b", [0], shares)
    with pytest.raises(ValueError, match="repeats seed 0 .*not an independent repeat"):
        pool_runs([a, b], tmp_path / "p1")
    c = _experiment(tmp_path / "c", [1], shares)
    data = json.loads((c / "manifest.json").read_text())
    data["settings"]["budget"] = 96
    (c / "manifest.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match="another design .*budget"):
        pool_runs([a, c], tmp_path / "p2")
    with pytest.raises(ValueError, match="no manifest.json"):
        pool_runs([a, tmp_path / "missing"], tmp_path / "p3")
    (tmp_path / "p4" / "runs").mkdir(parents=True)
    d = _experiment(tmp_path / "d", [2], shares)
    with pytest.raises(ValueError, match="already holds runs"):
        pool_runs([a, d], tmp_path / "p4")
    assert not (tmp_path / "p1").exists() and not (tmp_path / "p2").exists()


def test_pooling_takes_chosen_methods_from_a_folder_and_names_the_settings_that_differ(tmp_path):
    """A method's runs reused from an earlier experiment (FOLDER:method) beside methods rerun under changed
    settings: pooled per method with the same seeds, the changed settings listed; mixed settings within one
    method, and methods with different seeds, are refused."""
    from rods_lab.experiments.curriculum_report import differing_lines
    from rods_lab.experiments.runner import parse_source, pool_runs

    assert parse_source("x/a:rods,static") == (tmp_path.__class__("x/a"), ["rods", "static"])
    assert parse_source("x/b:c") == (tmp_path.__class__("x/b:c"), None)  # not methods: part of the name
    old = _experiment(tmp_path / "old", [0, 1], {"rods": [[0.5] * 4] * 2, "static": [[0.4, 0.4, 0.2, 0.2]] * 2})
    new = _experiment(tmp_path / "new", [0, 1], {"rods": [[0.6, 0.6, 0.8, 0.8]] * 2}, extra={"buffer": {"p_max": 8}})
    settings, meta = pool_runs([new, f"{old}:static"], tmp_path / "pooled")
    assert settings["methods"] == ["rods", "static"] and settings["repeats"] == 2
    assert [m["pooled_from"] for m in meta] == [f"{new}/runs/rods_r0", f"{new}/runs/rods_r1",
                                                f"{old}/runs/static_r0", f"{old}/runs/static_r1"]  # fmt: skip
    assert settings["differs_by_method"] == {"buffer.p_max": {"rods": 8, "static": None}}
    assert "`buffer.p_max`: rods 8, static default" in differing_lines(settings["differs_by_method"])[0]
    frames, _, _ = load_experiment(tmp_path / "pooled")
    assert math.isclose(share_ratio(frames)[0], 0.8 / 0.2)  # the old static runs, the new rods runs
    later = _experiment(tmp_path / "later", [2], {"rods": [[0.5] * 4]})
    with pytest.raises(ValueError, match="rods_r0 has other settings than .*buffer.p_max"):
        pool_runs([new, later], tmp_path / "mixed")  # rods under two settings: not one method's repeats
    with pytest.raises(ValueError, match="has no runs of dapo_filter"):
        pool_runs([new, f"{old}:dapo_filter"], tmp_path / "absent")
    other = _experiment(tmp_path / "other", [5], {"static": [[0.3] * 4]})
    with pytest.raises(ValueError, match=r"different seeds \(rods \[0, 1\]; static \[5\]\)"):
        pool_runs([new, other], tmp_path / "unpaired")


def test_app_watch_bench_puts_cpu_on_the_group_whose_process_burnt_it():
    """The app-watch bench says which side of a slowdown costs (trainer, server, browser): a child of this
    process counts in its group, this script in "bench", a process under another root in that root's group.
    The children say when they are ready, so nothing here waits on the clock or on the machine's load."""
    import os
    import subprocess
    import sys

    from bench.app_watch_bench import cpu_seconds

    def child(code: str) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline() == "ready\n"  # blocks until the child has done its work
        return proc

    idle = child("import time; print('ready', flush=True); time.sleep(60)")
    try:
        roots = {"server": [idle.pid], "browser": [os.getpid()]}
        before = cpu_seconds(roots)
        assert before[idle.pid][0] == "server" and before[os.getpid()][0] == "bench"  # first group named wins
        burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\nprint('ready', flush=True)\ntime.sleep(60)"  # fmt: skip
        burner = child(burn)
        try:
            after = cpu_seconds(roots)
        finally:
            burner.kill()
    finally:
        idle.kill()
    assert burner.pid not in before and after[burner.pid][0] == "browser"  # a child of this process
    # Its CPU seconds are counted; how many the kernel has booked for the 0.3 it burnt depends on the
    # machine's accounting under load, so the figure is printed, not asserted.
    assert after[burner.pid][1] > 0
    print(f"CPU seconds booked for a 0.3 s burn: {after[burner.pid][1]:.2f}")


def test_cores_used_sums_each_group_per_wall_second():
    """A process born between the snapshots counts from 0, one that died is lost, a group's CPU seconds
    are divided by the wall seconds between the snapshots."""
    from bench.app_watch_bench import cores_used

    before = {1: ("server", 10.0), 2: ("browser", 5.0), 3: ("browser", 7.0)}
    after = {1: ("server", 10.5), 2: ("browser", 6.0), 4: ("browser", 2.0), 5: ("bench", 0.25)}
    assert cores_used(before, after, wall=2.0) == {"server": 0.25, "browser": 1.5, "bench": 0.125}


def test_update_bench_lays_out_rollouts_as_trl_does():
    """bench.update_bench times both arms on TRL's pass layout: prompts left-padded, completions right-padded."""
    import types

    from bench.update_bench import _layout

    episodes = [
        types.SimpleNamespace(prompt_ids=[5, 6, 7], completion_ids=[8, 9]),
        types.SimpleNamespace(prompt_ids=[5, 6], completion_ids=[10, 11, 12]),
    ]
    ids, mask, keep = _layout(episodes)
    assert keep == 3
    assert ids.tolist() == [[5, 6, 7, 8, 9, 0], [0, 5, 6, 10, 11, 12]]
    assert mask.tolist() == [[1, 1, 1, 1, 1, 0], [0, 1, 1, 1, 1, 1]]


def test_benches_that_take_a_model_default_to_the_trained_demo_model_once_built(tmp_path, monkeypatch):
    """bench.generation_bench and bench.vllm_bench play the demo config's model when it is built (an untrained
    model is another workload); before that, generation_bench needs --model and vllm_bench builds one."""
    from bench import generation_bench, vllm_bench
    from bench.demo_model import ROOT, demo_model

    model = tmp_path / "models" / "tiny-demo"
    config = tmp_path / "demo.yaml"
    config.write_text(yaml.safe_dump({"model": {"path": str(model)}}))
    assert demo_model(config) is None
    model.mkdir(parents=True)
    assert demo_model(config) is None  # a folder still being built (its config.json comes last)
    (model / "config.json").write_text("{}")
    assert demo_model(config) == model
    config.write_text(yaml.safe_dump({"model": {"path": "models/none-such"}}))
    assert demo_model(config) is None and not (ROOT / "models" / "none-such").exists()  # read from the repository

    for bench in (generation_bench, vllm_bench):
        monkeypatch.setattr(bench, "demo_model", lambda: model)  # where the demo model lies on this machine
        assert bench.arguments([]).model == str(model)
        assert bench.arguments(["--model", "other"]).model == "other"
        monkeypatch.setattr(bench, "demo_model", lambda: None)
    assert vllm_bench.arguments([]).model is None  # it builds an untrained model, as before
    with pytest.raises(SystemExit):
        generation_bench.arguments([])  # --model stays required until the demo model is built
