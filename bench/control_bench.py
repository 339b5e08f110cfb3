"""The control store under contention: writer processes adding decisions while one process lists them (the
app) and one claims and applies them (a trainer). Used by the store tests and `python -m bench.store_bench
contention`; kept apart from store_bench so its processes start without the event log's imports."""

from __future__ import annotations

import multiprocessing
import os
import tempfile
import time
from pathlib import Path

from storage.control import ControlDB


def _add_decisions(target: str, run_id: str, n: int, go, out) -> None:
    """A writer: n decisions as fast as it can once `go` is set; reports the ids it was told and its span."""
    try:
        db = ControlDB(target)
        go.wait()
        t0 = time.time()
        ids = [
            db.add_decision(run_id, f"task_{os.getpid()}_{i}", "approve", author=f"w{os.getpid()}").id for i in range(n)
        ]
        out.put(("writer", {"ids": ids, "start": t0, "end": time.time()}))
    except Exception as e:  # noqa: BLE001 - reported to the caller, which fails on any
        out.put(("error", f"writer: {type(e).__name__}: {e}"))


def _list_decisions(target: str, run_id: str, go, stop, out) -> None:
    """The app: lists the run's decisions and the runs until `stop`."""
    try:
        db = ControlDB(target)
        go.wait()
        reads = 0
        while not stop.is_set():
            db.decisions(run_id)
            db.list_runs()
            reads += 1
            time.sleep(0.01)  # polls (the app's period is seconds): a busy loop would starve the writers of CPU
        out.put(("reader", {"reads": reads}))
    except Exception as e:  # noqa: BLE001
        out.put(("error", f"reader: {type(e).__name__}: {e}"))


def _claim_decisions(target: str, run_id: str, go, stop, out) -> None:
    """A trainer: claims pending decisions and marks each applied until `stop`, then one last round."""
    try:
        db = ControlDB(target)
        go.wait()
        claimed, double = [], []
        while True:
            last = stop.is_set()
            for d in db.claim_decisions(run_id):
                claimed.append(d.id)
                if not db.mark_decision(d.id, "applied", "claimed under contention", step=1):
                    double.append(d.id)
            if last:
                break
            time.sleep(0.01)
        out.put(("claimer", {"claimed": claimed, "double_marked": double}))
    except Exception as e:  # noqa: BLE001
        out.put(("error", f"claimer: {type(e).__name__}: {e}"))


def contention(target: str, writers: int = 8, per_writer: int = 25, run_id: str = "contended") -> dict:
    """`writers` processes each add `per_writer` decisions at once while one process lists them and one
    claims and marks them. Returns what each was told (ids returned, ids claimed, errors) and the rate."""
    ctx = multiprocessing.get_context("spawn")
    go, stop, out = ctx.Event(), ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_add_decisions, args=(target, run_id, per_writer, go, out)) for _ in range(writers)]
    procs += [ctx.Process(target=f, args=(target, run_id, go, stop, out)) for f in (_list_decisions, _claim_decisions)]
    for p in procs:
        p.start()
    go.set()  # the store was opened by each process before: what is timed is the writes
    results: dict[str, list] = {"writer": [], "reader": [], "claimer": [], "error": []}
    while len(results["writer"]) + len(results["error"]) < writers:
        role, value = out.get(timeout=300)
        results[role].append(value)
    stop.set()
    while sum(len(v) for v in results.values()) < len(procs):
        role, value = out.get(timeout=300)
        results[role].append(value)
    for p in procs:
        p.join(timeout=60)
    spans = results["writer"]
    ids = [i for w in spans for i in w["ids"]]
    seconds = max(w["end"] for w in spans) - min(w["start"] for w in spans) if spans else float("nan")
    claimer = results["claimer"][0] if results["claimer"] else {"claimed": [], "double_marked": []}
    return {
        "ids": ids,
        "claimed": claimer["claimed"],
        "double_marked": claimer["double_marked"],
        "reads": sum(r["reads"] for r in results["reader"]),
        "errors": results["error"],
        "exit_codes": [p.exitcode for p in procs],
        "decisions_per_s": round(len(ids) / seconds, 1) if seconds > 0 else None,
    }


def contention_report(url: str | None = None, writers: int = 8, per_writer: int = 50) -> dict:
    """Decisions per second at `writers` writers, for SQLite (a temporary file) and PostgreSQL if given."""
    targets = {}
    with tempfile.TemporaryDirectory() as tmp:
        targets["sqlite"] = str(Path(tmp) / "control.sqlite")
        url = url or os.environ.get("RODS_TEST_POSTGRES_URL")
        if url:
            targets["postgresql"] = url
        report = {}
        for name, target in targets.items():
            r = contention(target, writers, per_writer, run_id=f"bench_{os.getpid()}_{time.time_ns()}")
            report[name] = {
                "writers": writers,
                "decisions": len(r["ids"]),
                "unique_ids": len(set(r["ids"])),
                "errors": r["errors"],
                "decisions_per_s": r["decisions_per_s"],
            }
    return report
