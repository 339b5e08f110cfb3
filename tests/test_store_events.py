"""The run event log: schema checks, compaction, truncation on resume, a SIGKILLed writer, and a
writer and a reader process running together (for a minute in `make test-all`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from polling import wait_until

from storage.events import EventLog, EventLogBusy, EventSchemaError, PartFile, split_live, write_table_atomic
from storage.reader import RunReader
from storage.schema import EVENT_KINDS, STEP_METRICS

WORKERS = Path(__file__).with_name("store_workers.py")
ROOT = Path(__file__).resolve().parents[1]


def _stats_rows(step: int, n: int = 5) -> list[dict]:
    return [
        {"step": step, "task_id": f"t{i}", "n": 8, "mean": i / n, "var": 0.1 * i, "region": "boundary"}
        for i in range(n)
    ]


def test_schema_names_are_namespaced_and_every_kind_has_step():
    assert all("/" in m and m.split("/")[0] for m in STEP_METRICS)
    for kind in EVENT_KINDS.values():
        assert {"step", "seq", "time"} <= set(kind.arrow_schema().names)


def test_rows_are_visible_after_flush_only(tmp_path):
    log, reader = EventLog(tmp_path), RunReader(tmp_path)
    log.append("task_stats", _stats_rows(0))
    assert reader.counts()["task_stats"] == 0 and log.pending_rows == 5
    log.flush()
    df = reader.task_stats_at()
    assert list(df.task_id) == [f"t{i}" for i in range(5)]
    assert reader.latest_step() is None  # no `step` row yet
    log.append("step", {"step": 0, "reward/mean": 0.25, "wall_s": 1.5})
    log.close()
    assert reader.latest_step() == 0
    assert reader.step_metrics()["reward/mean"].tolist() == [0.25]


def test_bad_rows_are_refused_with_the_kind_and_column(tmp_path):
    log = EventLog(tmp_path)
    with pytest.raises(EventSchemaError, match="unknown event kind 'stepz'"):
        log.append("stepz", {"step": 1})
    with pytest.raises(EventSchemaError, match=r"step row 0: unknown column\(s\) \['reward_mean'\]"):
        log.append("step", {"step": 1, "reward_mean": 0.5})
    with pytest.raises(EventSchemaError, match="step must be an integer"):
        log.append("task_stats", {"task_id": "t"})
    with pytest.raises(EventSchemaError, match="wrong type"):
        log.append("task_stats", {"step": 1, "task_id": "t", "mean": "high"})
    assert log.pending_rows == 0


def test_one_writer_per_run(tmp_path):
    import numpy as np
    import pandas as pd

    log = EventLog(tmp_path)
    with pytest.raises(EventLogBusy, match="one writer per run"):
        EventLog(tmp_path)
    log.append("task_stats", pd.DataFrame({"step": np.array([1, 1]), "task_id": ["a", "b"], "mean": [0.5, 1.0]}))
    log.close()
    with pytest.raises(ValueError, match="closed"):
        log.append("step", {"step": 2})
    with EventLog(tmp_path) as again:  # the lock went with close()
        again.append("step", {"step": np.int64(1)})
    dropped = EventLog(tmp_path)
    del dropped  # garbage collected without close(): the lock goes too
    EventLog(tmp_path).close()
    assert RunReader(tmp_path).counts() == {**dict.fromkeys(EVENT_KINDS, 0), "task_stats": 2, "step": 1}


def test_json_columns_round_trip(tmp_path):
    with EventLog(tmp_path) as log:
        log.append(
            "variant",
            {
                "step": 2,
                "variant_id": "v1",
                "parent_id": "multi_turn_base_3",
                "accepted": True,
                "stages": {"plan": "ok", "critique": {"score": 0.9}},
                "task": None,
            },
        )
        log.append(
            "variant",
            {
                "step": 3,
                "variant_id": "v2",
                "parent_id": "v1",
                "accepted": False,
                "stages": {"execute": "failed"},
                "reason": "ground truth raised",
            },
        )
    df = RunReader(tmp_path).variants()
    assert json.loads(df.stages[0]) == {"plan": "ok", "critique": {"score": 0.9}}
    assert list(df.root_id) == ["multi_turn_base_3", "multi_turn_base_3"]
    assert list(df.generation) == [1, 2]


def test_buffer_pools_follow_the_latest_move(tmp_path):
    with EventLog(tmp_path) as log:
        log.append(
            "buffer",
            [
                {"step": 0, "task_id": "a", "from_pool": None, "to_pool": "seeds", "reason": "seed"},
                {"step": 0, "task_id": "b", "from_pool": None, "to_pool": "staged", "reason": "synth"},
                {"step": 1, "task_id": "b", "from_pool": "staged", "to_pool": "active", "reason": "probe"},
                {"step": 1, "task_id": "a", "from_pool": "seeds", "to_pool": "retired", "reason": "mastered"},
            ],
        )
    reader = RunReader(tmp_path)
    assert dict(zip(reader.buffer_pools().task_id, reader.buffer_pools().pool, strict=True)) == {
        "a": "retired",
        "b": "active",
    }
    assert dict(zip(reader.pool_sizes().pool, reader.pool_sizes().n, strict=True)) == {"active": 1, "retired": 1}


def test_compaction_keeps_every_row_once(tmp_path):
    log = EventLog(tmp_path, compact_at_files=10_000)
    for s in range(30):
        log.append("task_stats", _stats_rows(s))
        log.flush()
    assert len(split_live(tmp_path / "events" / "task_stats")[0]) == 30
    before = RunReader(tmp_path).query("SELECT step, task_id, seq FROM task_stats ORDER BY seq")
    assert log.compact("task_stats") == 30
    assert len(split_live(tmp_path / "events" / "task_stats")[0]) == 1
    after = RunReader(tmp_path).query("SELECT step, task_id, seq FROM task_stats ORDER BY seq")
    assert before.equals(after)


def test_parts_covered_by_a_merged_file_are_not_read_twice(tmp_path):
    """A compaction killed after writing the merged file but before deleting its parts."""
    log = EventLog(tmp_path, compact_at_files=10_000)
    for s in range(4):
        log.append("task_stats", _stats_rows(s))
        log.flush()
    live, _ = split_live(tmp_path / "events" / "task_stats")
    import pyarrow as pa

    merged = pa.concat_tables([pq.read_table(p.path) for p in live])
    write_table_atomic(
        merged, tmp_path / "events" / "task_stats" / PartFile.name(live[0].seq_lo, live[-1].seq_hi, 0, 3)
    )
    assert RunReader(tmp_path).counts()["task_stats"] == 20
    log.close()
    EventLog(tmp_path)  # reopening finishes the compaction
    assert len(list((tmp_path / "events" / "task_stats").glob("*.parquet"))) == 1


def test_truncate_after_drops_later_steps_and_appends_continue(tmp_path):
    log = EventLog(tmp_path, compact_at_files=10_000)
    for s in range(10):
        log.append("task_stats", _stats_rows(s))
        if s % 3 == 2 or s == 9:  # parts straddle several steps: 0-2, 3-5, 6-8, 9
            log.flush()
    log.append("task_stats", _stats_rows(10))  # buffered, never flushed
    assert log.truncate_after(4) == 5 * 5 + 5  # steps 5..9 written, step 10 buffered
    reader = RunReader(tmp_path)
    assert reader.query("SELECT max(step) AS s FROM task_stats").s[0] == 4
    log.append("task_stats", _stats_rows(5))
    log.close()
    df = reader.query(
        "SELECT step, count(*) AS n, count(DISTINCT seq) AS u FROM task_stats GROUP BY step ORDER BY step"
    )
    assert df.step.tolist() == list(range(6)) and set(df.n) == {5} and (df.n == df.u).all()


def _run_worker(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(WORKERS), *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw
    )


def test_sigkilled_writer_leaves_a_readable_log_and_resume_truncates(tmp_path):
    proc = _run_worker("killable", str(tmp_path), "40")
    assert proc.stdout.readline().strip() == "ready"
    reader = RunReader(tmp_path)
    # Killed mid-write once the writer has compacted (every 8 parts) and kept going: wait for that, not a time.
    try:
        wait_until(lambda: (reader.latest_step() or 0) >= 12, "the writer to log 12 steps")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    per_step = reader.query("SELECT step, count(*) AS n FROM task_stats GROUP BY step ORDER BY step")
    assert len(per_step) >= 3 and set(per_step.n) == {40}  # every visible part is whole
    assert set(reader.query("SELECT count(*) AS n FROM rollouts GROUP BY step").n) == {4}
    last = reader.latest_step()
    # Resume from the last completed step: later events (a step's task_stats without its step row) go.
    log = EventLog(tmp_path)
    assert not list(tmp_path.rglob("*.tmp"))
    log.truncate_after(last)
    assert reader.query("SELECT max(step) AS s FROM task_stats").s[0] == last
    assert reader.query("SELECT max(step) AS s FROM rollouts").s[0] == last
    assert reader.query("SELECT count(*) AS n, count(DISTINCT seq) AS u FROM task_stats").pipe(
        lambda d: d.n[0] == d.u[0]
    )


SOAK_S = float(os.environ.get("RODS_STORE_SOAK_S", "62"))
MIN_STEPS, MIN_ROUNDS = 120, 60  # ~10 compactions under 60 rounds of 4 queries, however fast the machine


@pytest.mark.parametrize("seconds", [0, pytest.param(SOAK_S, marks=pytest.mark.slow, id="minute")])
def test_writer_and_reader_processes_together(tmp_path, seconds):
    """Zero reader errors; every step the reader sees is complete; nothing lost or duplicated. The default
    suite runs MIN_STEPS steps under MIN_ROUNDS query rounds; `make test-all` adds a minute-long soak."""
    rows, run_dir, stop = 50, tmp_path / "run", tmp_path / "reader-done"
    proc = _run_worker("writer", str(run_dir), str(seconds), str(rows), "12", str(MIN_STEPS), str(stop))
    reader, errors, queries, seen_max = RunReader(run_dir), [], 0, -1
    while proc.poll() is None:
        try:
            latest = reader.latest_step()
            df = reader.query(
                "SELECT step, count(*) AS n, count(DISTINCT task_id) AS u FROM task_stats "
                "WHERE step <= ? GROUP BY step",
                [-1 if latest is None else latest],
            )
            dup = reader.scalar("SELECT count(*) - count(DISTINCT seq) FROM task_stats")
            reader.region_counts()
            queries += 4
            if latest is not None:
                assert latest >= seen_max, "latest step went backwards"
                seen_max = latest
                assert len(df) == latest + 1 and set(df.n) == {rows} and set(df.u) == {rows}, "incomplete step"
            assert dup == 0, "duplicated events"
        except Exception as e:  # collected, so the writer still finishes
            errors.append(repr(e))
        if queries >= 4 * MIN_ROUNDS:
            stop.touch()  # the writer may finish once it has also written MIN_STEPS
        time.sleep(0.02)
    out, err = proc.communicate()
    assert proc.returncode == 0, err
    steps = json.loads(out)["steps"]
    print(f"soak: {steps} steps, {steps * (rows + 2)} events, {queries} queries, {reader.retried} retried")
    assert errors == []
    final = reader.query("SELECT count(*) AS n, count(DISTINCT (step, task_id)) AS u, max(step) AS m FROM task_stats")
    assert final.n[0] == final.u[0] == steps * rows and final.m[0] == steps - 1
    assert reader.counts()["step"] == steps == reader.counts()["buffer"]
    assert steps >= MIN_STEPS and queries >= 4 * MIN_ROUNDS
    # compaction ran while the reader read
    assert len(split_live(run_dir / "events" / "task_stats")[0]) < steps / 4
