"""Run event log writer: append-only Parquet part files per event kind under runs/<id>/events/<kind>/.

The trainer process is the only writer of its run folder. Rows are buffered in memory and written as
one part file per kind on flush() (at step boundaries, or when a kind buffers `max_buffer_rows`).
A part is written under a temporary name and renamed with os.replace, so a reader never sees half a
file; rows still buffered when the process dies are lost whole, never half written.

File names carry the write-sequence range and the step range of their rows:
    <seq_lo>-<seq_hi>.<step_lo>-<step_hi>.parquet
Compaction writes one merged file covering a sequence range, then deletes the parts it replaced; a
reader that lists the folder in between keeps only files not covered by a wider one (`live_files`),
so no event is ever counted twice. The step range lets a resumed run drop events past its checkpoint
(`truncate_after`).
"""

from __future__ import annotations

import fcntl
import json
import numbers
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from storage.schema import EVENT_KINDS, EventKind

_PART = re.compile(r"^(\d+)-(\d+)\.(\d+)-(\d+)\.parquet$")


class EventLogBusy(RuntimeError):
    """Another live process (or another EventLog in this one) already writes this run's events."""


class EventSchemaError(ValueError):
    """Rows that do not fit their event kind (unknown kind or column, wrong type, missing step)."""


@dataclass(frozen=True, order=True)
class PartFile:
    seq_lo: int
    seq_hi: int
    step_lo: int
    step_hi: int
    path: Path

    @classmethod
    def parse(cls, path: Path) -> PartFile | None:
        m = _PART.match(path.name)
        return cls(*(int(g) for g in m.groups()), path) if m else None

    @staticmethod
    def name(seq_lo: int, seq_hi: int, step_lo: int, step_hi: int) -> str:
        return f"{seq_lo:012d}-{seq_hi:012d}.{step_lo:09d}-{step_hi:09d}.parquet"


def events_dir(run_dir: str | Path) -> Path:
    return Path(run_dir) / "events"


def split_live(kind_dir: Path) -> tuple[list[PartFile], list[PartFile]]:
    """(live, covered) part files of one kind: a file whose sequence range lies inside another
    file's range was replaced by compaction (its deletion may still be pending)."""
    try:
        names = os.listdir(kind_dir)
    except FileNotFoundError:
        return [], []
    parts = sorted(
        (p for p in (PartFile.parse(kind_dir / n) for n in names) if p),
        key=lambda p: (p.seq_lo, -p.seq_hi),
    )
    live, covered, max_hi = [], [], -1
    for p in parts:
        (live if p.seq_hi > max_hi else covered).append(p)
        max_hi = max(max_hi, p.seq_hi)
    return live, covered


def live_files(run_dir: str | Path, kind: str) -> list[Path]:
    return [p.path for p in split_live(events_dir(run_dir) / kind)[0]]


def write_table_atomic(table: pa.Table, path: Path) -> None:
    """Write a Parquet file under a temporary name (not matching *.parquet), then rename it."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _kind(kind: str) -> EventKind:
    try:
        return EVENT_KINDS[kind]
    except KeyError:
        raise EventSchemaError(f"unknown event kind {kind!r}; known: {sorted(EVENT_KINDS)}") from None


class EventLog:
    """The writer of one run's event log. Not thread-safe: call it from the training loop only.

    Example:
        log = EventLog("runs/abc")
        log.append("task_stats", [{"step": 3, "task_id": "multi_turn_base_1", "n": 8, "mean": 0.5, ...}])
        log.flush()          # at the step boundary
    """

    def __init__(
        self,
        run_dir: str | Path,
        max_buffer_rows: int = 20_000,
        compact_at_files: int = 64,
        big_file_rows: int = 500_000,
    ):
        self.root = events_dir(run_dir)
        self.root.mkdir(parents=True, exist_ok=True)
        self.max_buffer_rows = max_buffer_rows
        self.compact_at_files = compact_at_files
        self.big_file_rows = big_file_rows
        self._pending: dict[str, list[pa.Table]] = {}
        self._pending_rows: dict[str, int] = {}
        self._n_live: dict[str, int] = {}
        self._lock_fd: int | None = self._lock()
        self._next_seq = self._recover()

    def _lock(self) -> int:
        """Hold an exclusive flock on events/.writer.lock while open; the kernel drops it when the
        process dies (even by SIGKILL), so a resumed run can take it over at once."""
        fd = os.open(self.root / ".writer.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise EventLogBusy(f"{self.root} is being written by another EventLog (one writer per run)") from None
        return fd

    # ----- recovery -----------------------------------------------------------------------------
    def _recover(self) -> int:
        """Finish what a killed writer left: drop temp files and parts a compaction had replaced.
        Returns the next free sequence number."""
        next_seq = 0
        for kind in EVENT_KINDS:
            d = self.root / kind
            if not d.is_dir():
                continue
            for n in os.listdir(d):
                if n.endswith(".tmp"):
                    (d / n).unlink(missing_ok=True)
            live, covered = split_live(d)
            for p in covered:
                p.path.unlink(missing_ok=True)
            self._n_live[kind] = len(live)
            if live:
                next_seq = max(next_seq, max(p.seq_hi for p in live) + 1)
        return next_seq

    # ----- appending ----------------------------------------------------------------------------
    def append(self, kind: str, rows: Mapping[str, Any] | Iterable[Mapping[str, Any]]) -> int:
        """Buffer rows of one kind; returns how many. Each row needs `step`; `time` defaults to now."""
        ek = _kind(kind)
        if self._lock_fd is None:
            raise ValueError("append to a closed EventLog")
        if hasattr(rows, "to_dict") and not isinstance(rows, Mapping):  # a pandas DataFrame
            rows = rows.to_dict("records")
        rows = [rows] if isinstance(rows, Mapping) else list(rows)
        if not rows:
            return 0
        cols = ek.all_columns()
        json_cols = [c for c, t in cols.items() if t == "json"]
        now = datetime.now(UTC)
        prepared = []
        for i, row in enumerate(rows):
            unknown = set(row) - cols.keys()
            if unknown:
                raise EventSchemaError(
                    f"{kind} row {i}: unknown column(s) {sorted(unknown)}; declare them in storage/schema.py"
                )
            step = row.get("step")
            if not isinstance(step, numbers.Integral) or isinstance(step, bool) or step < 0:
                raise EventSchemaError(f"{kind} row {i}: step must be an integer >= 0, got {step!r}")
            r = {**row, "step": int(step), "seq": self._next_seq + i}
            r.setdefault("time", now)
            for c in json_cols:
                if r.get(c) is not None:
                    r[c] = json.dumps(r[c], default=str)
            prepared.append(r)
        try:
            table = pa.Table.from_pylist(prepared, schema=ek.arrow_schema())
        except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
            raise EventSchemaError(f"{kind}: a value has the wrong type: {e}") from e
        self._next_seq += len(prepared)
        self._pending.setdefault(kind, []).append(table)
        self._pending_rows[kind] = self._pending_rows.get(kind, 0) + len(prepared)
        if self._pending_rows[kind] >= self.max_buffer_rows:
            self._flush_kind(kind)
        return len(prepared)

    def flush(self) -> None:
        """Write every buffered row (one part file per kind); compacts a kind with many files."""
        for kind in list(self._pending):
            self._flush_kind(kind)

    def close(self) -> None:
        """Flush and release the writer lock; idempotent."""
        if self._lock_fd is None:
            return
        self.flush()
        os.close(self._lock_fd)  # releases the flock
        self._lock_fd = None

    def __del__(self) -> None:
        # Dropped without close(): release the lock (buffered rows are lost, as on a crash).
        fd = getattr(self, "_lock_fd", None)
        if fd is not None:
            os.close(fd)
            self._lock_fd = None

    def __enter__(self) -> EventLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def pending_rows(self) -> int:
        return sum(self._pending_rows.values())

    def _flush_kind(self, kind: str) -> None:
        tables = self._pending.pop(kind, [])
        self._pending_rows.pop(kind, None)
        if not tables:
            return
        table = pa.concat_tables(tables)
        self._write_part(kind, table)
        if self._n_live.get(kind, 0) >= self.compact_at_files:
            self.compact(kind)

    def _write_part(self, kind: str, table: pa.Table) -> None:
        seq, step = table.column("seq"), table.column("step")
        d = self.root / kind
        d.mkdir(exist_ok=True)
        seq_lo, seq_hi = pc.min(seq).as_py(), pc.max(seq).as_py()
        name = PartFile.name(seq_lo, seq_hi, pc.min(step).as_py(), pc.max(step).as_py())
        write_table_atomic(table, d / name)
        self._n_live[kind] = self._n_live.get(kind, 0) + 1

    # ----- compaction ---------------------------------------------------------------------------
    def compact(self, kind: str | None = None, min_files: int = 2) -> int:
        """Merge runs of consecutive small part files into one file each; returns files removed.

        Safe under concurrent readers: the merged file appears (atomically) before the parts go, and
        readers ignore parts covered by it. Files of `big_file_rows` rows or more are left alone, so
        a long run rewrites each row a bounded number of times.
        """
        removed = 0
        for k in [kind] if kind else list(EVENT_KINDS):
            live, _ = split_live(self.root / k)
            group: list[PartFile] = []
            for p in [*live, None]:
                small = p is not None and pq.ParquetFile(p.path).metadata.num_rows < self.big_file_rows
                if small:
                    group.append(p)
                    continue
                if len(group) >= min_files:
                    removed += self._merge(k, group)
                group = []
            self._n_live[k] = len(split_live(self.root / k)[0])
        return removed

    def _merge(self, kind: str, group: list[PartFile]) -> int:
        table = pa.concat_tables([pq.read_table(p.path) for p in group], promote_options="default")
        name = PartFile.name(
            group[0].seq_lo, group[-1].seq_hi, min(p.step_lo for p in group), max(p.step_hi for p in group)
        )
        write_table_atomic(table, self.root / kind / name)
        for p in group:
            p.path.unlink(missing_ok=True)
        return len(group)

    # ----- resume -------------------------------------------------------------------------------
    def truncate_after(self, step: int) -> int:
        """Drop every event with step > `step` (a resumed run restarts from its checkpoint there);
        returns the rows dropped. Buffered rows are dropped too. Idempotent, so a crash midway is
        repaired by calling it again."""
        dropped = 0
        for kind, tables in list(self._pending.items()):
            keep = [t.filter(pc.less_equal(t.column("step"), step)) for t in tables]
            dropped += sum(len(t) for t in tables) - sum(len(t) for t in keep)
            self._pending[kind] = keep
            self._pending_rows[kind] = sum(len(t) for t in keep)
        for kind in EVENT_KINDS:
            live, _ = split_live(self.root / kind)
            for p in live:
                if p.step_hi <= step:
                    continue
                if p.step_lo > step:
                    dropped += pq.ParquetFile(p.path).metadata.num_rows
                    p.path.unlink(missing_ok=True)
                    continue
                table = pq.read_table(p.path)
                kept = table.filter(pc.less_equal(table.column("step"), step))
                dropped += len(table) - len(kept)
                # Same name (its step range is an upper bound), so no reader sees both versions.
                write_table_atomic(kept, p.path)
            self._n_live[kind] = len(split_live(self.root / kind)[0])
        return dropped
