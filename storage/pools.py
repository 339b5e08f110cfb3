"""The pools snapshot: runs/<id>/pools.json, the buffer's pool membership with full task records.

The trainer writes it (atomically: temp file + os.replace) after each step, so exports and the app read
whole tasks without touching the trainer's checkpoints. Format:
    {"format": "rods-pools/1", "step": 12, "written_at": "2026-...Z",
     "pools": {"seeds": [<task record>, ...], "staged": [...], "active": [...], "retired": [...]}}
Records are `Task.to_record()`; a pool may be missing (read as empty).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from rods_core.benchmarks.protocols import TaskRecord
from rods_core.benchmarks.registry import DEFAULT_BENCHMARK, task_type_of
from rods_core.benchmarks.task_files import record_parser
from rods_core.config import ConfigError, read_config_data
from storage.schema import POOLS

POOLS_FILE = "pools.json"
FORMAT = "rods-pools/1"


class PoolsFileError(ValueError):
    """pools.json is missing or holds an invalid record; the message names the pool and index."""


@dataclass
class PoolsSnapshot:
    step: int | None
    written_at: str | None
    pools: dict[str, list[TaskRecord]] = field(default_factory=dict)

    def tasks(self, pool: str) -> list[TaskRecord]:
        """Tasks of one pool, or of every pool for 'all' (a task listed twice keeps its first pool)."""
        if pool == "all":
            seen: dict[str, TaskRecord] = {}
            for p in POOLS:
                for t in self.pools.get(p, []):
                    seen.setdefault(t.id, t)
            return list(seen.values())
        if pool not in POOLS:
            raise ValueError(f"pool must be one of {POOLS} or 'all', got {pool!r}")
        return list(self.pools.get(pool, []))

    def pool_of(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for p in POOLS:
            for t in self.pools.get(p, []):
                out.setdefault(t.id, p)
        return out


def write_pools_snapshot(
    run_dir: str | Path, pools: Mapping[str, Iterable[TaskRecord | dict]], step: int | None = None
) -> Path:
    """Write the snapshot atomically; readers see the previous one or this one, never a mix."""
    unknown = set(pools) - set(POOLS)
    if unknown:
        raise ValueError(f"unknown pool(s) {sorted(unknown)}; pools are {POOLS}")
    doc = {
        "format": FORMAT,
        "step": step,
        "written_at": datetime.now(UTC).isoformat(),
        "pools": {p: [t if isinstance(t, dict) else t.to_record() for t in ts] for p, ts in pools.items()},
    }
    path = Path(run_dir) / POOLS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{POOLS_FILE}.", suffix=".tmp")
    try:
        # json.dumps, not json.dump: only the one-shot encoder is the C one (dump runs the pure-Python
        # encoder, ~15 ms a step for the demo's pools on the trainer's path)
        text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def read_pools_snapshot(run_dir: str | Path, task_type: type | None = None) -> PoolsSnapshot:
    """The run's pools, each task read by `task_type` (the run's benchmark's model: any Benchmark's); by the
    model of the benchmark its config.yaml names when not given (`run_task_type`)."""
    path = Path(run_dir) / POOLS_FILE
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PoolsFileError(f"{path}: no pools snapshot (the trainer writes it after each step)") from None
    except json.JSONDecodeError as e:
        raise PoolsFileError(f"{path}: not valid JSON: {e}") from e
    if doc.get("format") != FORMAT:
        raise PoolsFileError(f"{path}: format {doc.get('format')!r}, expected {FORMAT!r}")
    parse = record_parser(task_type or run_task_type(Path(run_dir)))
    pools: dict[str, list[TaskRecord]] = {}
    for p, recs in doc.get("pools", {}).items():
        if p not in POOLS:
            raise PoolsFileError(f"{path}: pools.{p}: unknown pool; pools are {POOLS}")
        pools[p] = []
        for i, rec in enumerate(recs):
            try:
                pools[p].append(parse(rec))
            except ValidationError as e:
                why = "; ".join(f"{'.'.join(map(str, x['loc'])) or '(record)'}: {x['msg']}" for x in e.errors())
                raise PoolsFileError(f"{path}: pools.{p}[{i}]: {why}") from e
            except ValueError as e:
                raise PoolsFileError(f"{path}: pools.{p}[{i}]: {e}") from e
    return PoolsSnapshot(step=doc.get("step"), written_at=doc.get("written_at"), pools=pools)


def run_task_type(run_dir: Path) -> type:
    """The task model of a run's benchmark (`benchmark:` in its config.yaml; BFCL multi-turn's `Task` for a
    run folder without one, or a run written before the field existed)."""
    cfg = run_dir / "config.yaml"
    try:
        name = read_config_data(cfg).get("benchmark", DEFAULT_BENCHMARK) if cfg.is_file() else DEFAULT_BENCHMARK
        return task_type_of(name)
    except (ConfigError, ValueError) as e:
        raise PoolsFileError(f"{cfg}: cannot tell the run's benchmark: {e}") from e
