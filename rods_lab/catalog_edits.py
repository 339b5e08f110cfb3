"""Edits of the seed catalog from the app — imports (an upload or a workspace file), the BFCL train split,
enable / disable, tags — for reviewers only (rods_lab.identity) and recorded under the acting user's name."""

from __future__ import annotations

from collections.abc import Iterable

from rods_core.benchmarks.protocols import Benchmark
from rods_core.benchmarks.registry import DEFAULT_BENCHMARK, make_benchmark
from rods_lab.identity import Actor, require
from rods_lab.paths import AppPaths, import_upload, import_workspace_file
from storage.catalog import ImportReport
from storage.control import ControlDB

WHAT = "edit the seed catalog"


def import_file(
    paths: AppPaths,
    db: ControlDB,
    actor: Actor,
    tags: list[str],
    benchmark: Benchmark,
    upload: tuple[str, bytes] | None = None,
    typed: str = "",
) -> ImportReport:
    """An uploaded (name, bytes) seed file, else the workspace file typed, verified whole and then imported."""
    require(actor, "reviewer", WHAT)
    by = actor.name or None
    if upload is not None:
        return import_upload(paths, db, upload[0], upload[1], tags, benchmark, by=by)
    return import_workspace_file(paths, db, typed, tags, benchmark, by=by)


def add_bfcl_train(db: ControlDB, actor: Actor) -> tuple[int, int]:
    """The 400 BFCL train seeds (BFCL multi-turn, the default benchmark), tagged bfcl: (added, updated)."""
    require(actor, "reviewer", WHAT)
    seeds = make_benchmark(DEFAULT_BENCHMARK).seeds("train")
    return db.upsert_seeds(seeds, source="bfcl", tags=["bfcl"], by=actor.name or None)


def set_enabled(db: ControlDB, task_ids: Iterable[str], enabled: bool, actor: Actor) -> int:
    """Enable or disable seeds in one transaction; how many matched."""
    require(actor, "reviewer", WHAT)
    return db.set_seeds_enabled(task_ids, enabled, by=actor.name or None)


def retag(db: ControlDB, task_ids: Iterable[str], tag: str, add: bool, actor: Actor) -> int:
    """Add (or remove) one tag on seeds in one transaction; how many changed."""
    require(actor, "reviewer", WHAT)
    return db.retag_seeds(task_ids, tag, add, by=actor.name or None)
