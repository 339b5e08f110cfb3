"""The boundary detector on constructed reward matrices: regions, smoothing, the figure, checkpoint, zero cost."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from rods_core.boundary import BoundaryDetector, check_matrix, classify, group_stats, variance_share
from rods_core.config import BoundaryConfig
from tests.test_buffer import observe

CFG = BoundaryConfig()  # mastered >= 0.8, hard <= 0.2, flat below 1% of the Popoviciu bound, alpha 0.5


def flips(k: int, g: int = 16) -> list[float]:
    """A group of g binary rewards with k successes."""
    return [1.0] * k + [0.0] * (g - k)


# ----- pure functions --------------------------------------------------------------------------------
def test_group_stats_is_population_variance_and_share_hits_popoviciu_bound():
    mean, var = group_stats(flips(8))
    assert (mean, var) == (0.5, 0.25)
    assert variance_share(var) == 1.0
    assert group_stats([0.3, 0.3, 0.3]) == pytest.approx((0.3, 0.0))
    mean, var = group_stats(flips(1))
    assert mean == 1 / 16 and var == pytest.approx((1 / 16) * (15 / 16))


@pytest.mark.parametrize(
    ("rewards", "region"),
    [
        (flips(16), "mastered"),
        (flips(14), "mastered"),  # mean 0.875 >= 0.8 despite variance
        (flips(0), "hard"),
        (flips(2), "hard"),  # mean 0.125 <= 0.2
        (flips(8), "boundary"),
        (flips(4), "boundary"),  # mean 0.25: just inside the band
        ([0.5] * 16, "hard"),  # flat in the middle: the same turns fail every time, no gradient
        ([0.5] * 15 + [0.75], "boundary"),  # var share 0.0146 >= 0.01
    ],
)
def test_classify_every_region(rewards, region):
    mean, var = group_stats(rewards)
    assert classify(mean, var, CFG) == region


def test_thresholds_are_configurable():
    mean, var = group_stats(flips(12))  # 0.75
    assert classify(mean, var, CFG) == "boundary"
    assert classify(mean, var, BoundaryConfig(mastered_mean=0.7)) == "mastered"
    assert classify(mean, var, BoundaryConfig(min_variance_share=1.0)) == "hard"


@pytest.mark.parametrize(
    ("matrix", "message"),
    [
        ({"t": []}, "task 't' has no rewards"),
        ({"t": [0.5, 1.5]}, "task 't' rollout 1: reward 1.5 outside"),
        ({"t": [0.5, -0.1]}, "rollout 1: reward -0.1 outside"),
        ({"t": [math.nan]}, "rollout 0: reward nan is not a finite number"),
        ({"t": [True]}, "not a finite number"),
        ({"t": ["1"]}, "not a finite number"),
        ({"": [1.0]}, "task id must be a non-empty string"),
    ],
)
def test_bad_matrices_name_the_task_and_rollout(matrix, message):
    with pytest.raises(ValueError, match=message):
        check_matrix(matrix)
    det = BoundaryDetector()
    with pytest.raises(ValueError):
        det.update(0, matrix)
    assert len(det) == 0


# ----- the stateful detector ---------------------------------------------------------------------------
def test_numpy_scalars_are_accepted():
    np = pytest.importorskip("numpy")
    det = BoundaryDetector()
    det.update(0, {"t": [np.float32(1.0), np.float64(0.0), 1]})
    assert det.stats("t").last_mean == pytest.approx(2 / 3)


def test_first_observation_reports_entry_into_each_region():
    det = BoundaryDetector()
    changes = det.update(3, {"m": flips(16), "b": flips(8), "h": flips(0)})
    assert {(c.task_id, c.old, c.new, c.step) for c in changes} == {
        ("m", None, "mastered", 3),
        ("b", None, "boundary", 3),
        ("h", None, "hard", 3),
    }
    assert {t: det.region(t) for t in ("m", "b", "h")} == {"m": "mastered", "b": "boundary", "h": "hard"}
    st = det.stats("b")
    assert (st.observations, st.rollouts, st.first_step, st.last_step) == (1, 16, 3, 3)
    assert st.var_share == 1.0 and st.last_informative_step == 3
    assert det.stats("h").last_informative_step is None
    assert det.stats("unseen") is None and det.region("unseen") is None


def test_smoothing_streaks_and_changes_over_steps():
    det = BoundaryDetector()
    det.update(0, {"t": flips(16)})
    assert det.update(1, {"t": flips(16)}) == []  # no change, no event
    assert det.stats("t").streak == 2
    # One bad group: EMA mean 0.5*1.0 + 0.5*0.25 = 0.625, var 0.5*0 + 0.5*0.1875 -> boundary.
    (change,) = det.update(2, {"t": flips(4)})
    assert (change.old, change.new) == ("mastered", "boundary")
    st = det.stats("t")
    assert st.mean == pytest.approx(0.625) and st.var == pytest.approx(0.09375)
    assert (st.last_mean, st.streak, st.observations, st.rollouts) == (0.25, 1, 3, 48)
    # alpha = 1 reads only the last group (the paper's reading).
    last_only = BoundaryDetector(BoundaryConfig(ema_alpha=1.0))
    last_only.update(0, {"t": flips(16)})
    last_only.update(1, {"t": flips(4)})
    assert last_only.stats("t").mean == 0.25


def test_fresh_restarts_smoothing_but_keeps_counts():
    det = BoundaryDetector()
    for s in range(5):
        det.update(s, {"t": flips(16)})
    det.update(30, {"t": flips(8)}, fresh={"t"})
    st = det.stats("t")
    assert (st.mean, st.var, st.region, st.streak, st.observations) == (0.5, 0.25, "boundary", 1, 6)


def test_logged_statistics_reproduce_the_boundary_figure(tmp_path):
    """The detector's statistics, logged as a run logs them, give the paper's figure through the app's SQL
    (boundary-zone variance well above the other regions')."""
    from rods_lab.views import boundary_vs_others
    from storage.events import EventLog
    from storage.reader import RunReader

    det = BoundaryDetector()
    matrix = {f"b{i}": flips(6 + i) for i in range(4)}  # means 0.375..0.56, var ~0.23-0.25
    matrix |= {f"m{i}": flips(14 + i % 3) for i in range(4)}  # mastered, var 0..0.11
    matrix |= {f"h{i}": flips(i % 3) for i in range(4)}  # hard, var 0..0.11
    with EventLog(tmp_path) as log:
        for step, m in [(7, matrix), (8, {"b0": flips(8)})]:
            det.update(step, m)
            rows = []
            for tid, rewards in m.items():
                st = det.stats(tid)
                rows.append({"step": step, "task_id": tid, "n": len(rewards), "mean": st.last_mean, "var": st.last_var,
                             "smoothed_mean": st.mean, "smoothed_var": st.var, "region": st.region})  # fmt: skip
            log.append("task_stats", rows)
    by_region = RunReader(tmp_path).variance_by_region()
    at7 = by_region[by_region.step == 7].set_index("region")
    assert at7.n.to_dict() == {"boundary": 4, "hard": 4, "mastered": 4}
    assert at7.mean_var["boundary"] > 2 * at7.mean_var["mastered"]
    assert at7.mean_var["boundary"] > 2 * at7.mean_var["hard"]
    assert by_region[by_region.step == 8][["region", "mean_var", "n"]].values.tolist() == [["boundary", 0.25, 1]]
    ratio = boundary_vs_others(by_region).set_index("step")
    assert ratio.ratio[7] > 2 and math.isnan(ratio.ratio[8])  # no other region at step 8


def test_state_dict_round_trips_through_json_and_continues_identically():
    a = BoundaryDetector(BoundaryConfig(ema_alpha=0.3))
    for s in range(4):
        a.update(s, {"x": flips(4 * s), "y": flips(16 - 3 * s), "z": [0.25 * s] * 8})
    b = BoundaryDetector(BoundaryConfig(ema_alpha=0.3))
    b.load_state_dict(json.loads(json.dumps(a.state_dict())))
    assert b.state_dict() == a.state_dict()
    for s in range(4, 8):
        m = {"x": flips(s), "w": flips(16 - s)}
        assert a.update(s, m) == b.update(s, m)
    assert a.state_dict() == b.state_dict()
    with pytest.raises(ValueError, match="unsupported version"):
        b.load_state_dict({"version": 9, "tasks": {}})
    with pytest.raises(ValueError, match="task 'x'"):
        b.load_state_dict({"version": 1, "tasks": {"x": {"observations": 1}}})


# ----- zero cost: no generation, no environment ------------------------------------------------------
def test_detection_makes_no_generation_and_no_environment_call(monkeypatch, train_seeds):
    """Every entry point of the environment, the checker, the episode runner and the generation backends
    raises while the detector and the buffer run over many matrices: none may be reached."""
    from rods_core import rollout
    from rods_core.benchmarks.bfcl import checker
    from rods_core.benchmarks.bfcl import environment as bfcl
    from rods_core.buffer import ReplayBuffer
    from rods_core.config import BufferConfig
    from rods_core.policy import cached_generation, generation

    calls: dict[str, int] = {}

    def counting(name):
        def hook(*args, **kwargs):
            calls[name] = calls.get(name, 0) + 1
            raise AssertionError(f"{name} was called during detection")

        return hook

    entry_points = [
        (bfcl.BfclEnvironment, "__init__"),
        (bfcl.BfclEnvironment, "execute"),
        (bfcl.BfclEnvironment, "execute_call"),
        (checker.TurnChecker, "__init__"),
        (checker.TurnChecker, "check_turn"),
        (checker, "score_calls"),
        (rollout, "run_episodes"),
        (generation.HFGenerator, "generate"),
        (generation.VLLMGenerator, "generate"),
        (cached_generation.CachedHFGenerator, "generate"),
        (cached_generation.CachedHFGenerator, "stream"),
        (generation.StreamInRounds, "stream"),
    ]
    for owner, attr in entry_points:
        monkeypatch.setattr(owner, attr, counting(f"{getattr(owner, '__name__', owner)}.{attr}"))
    with pytest.raises(AssertionError):  # the hooks are live: a call is caught and counted
        generation.HFGenerator.generate(None, [[1]], None)
    assert calls == {"HFGenerator.generate": 1}
    calls.clear()

    seeds = train_seeds[:40]
    buf = ReplayBuffer(seeds, BoundaryDetector(), BufferConfig(seed=1))
    observed: set[str] = set()
    for step in range(60):
        batch = buf.sample(8)
        matrix = {tid: flips((step * 3 + i * 5) % 17) for i, tid in enumerate(dict.fromkeys(batch))}
        observe(buf, step, matrix)
        observed |= matrix.keys()
    assert calls == {}
    assert all(buf.detector.stats(t).observations >= 1 for t in observed) and len(observed) >= 20


def test_detector_and_buffer_modules_import_no_environment_model_or_trainer():
    code = (
        "import sys; import rods_core.boundary, rods_core.buffer, rods_core.sources; "
        "bad = [m for m in sys.modules if m.startswith(('rods_core.benchmarks.bfcl', 'rods_core.benchmarks.memory', 'rods_core.policy', 'rods_core.rollout', "
        "'torch', 'trl', 'transformers', 'bfcl_eval'))]; print(bad); sys.exit(1 if bad else 0)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
