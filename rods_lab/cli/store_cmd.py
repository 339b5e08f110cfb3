"""`rods export` and `rods runs ...`: thin shells over the runs in the control store (storage/).

The store and the lab's views (SQLModel, DuckDB, pandas) are imported inside the commands so `rods --help` stays
fast; storage.build_progress, which loads none of them, at the top.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from rods_core.config.inputs import check_output_file
from rods_lab.cli._common import DB_HELP, choices, clean_errors, emit_json, fail, open_db
from storage.build_progress import read_build_progress

runs_app = typer.Typer(no_args_is_help=True, help="Training runs in the control database: list, show, stop.")

Pool = choices("Pool", ("seeds", "staged", "active", "retired", "all"))  # storage.schema.POOLS + all


def _run_dir(run_id: str, db: str | None, runs_dir: Path) -> Path:
    """runs_dir/<run_id>, else the folder registered for the run in the control database; an id that
    would lead outside the runs folder is refused (ids of older runs may break today's rule, so reading
    confines the path rather than applying rods_core.ids)."""
    folder = runs_dir / run_id
    if not folder.resolve().is_relative_to(runs_dir.resolve()) or folder.resolve() == runs_dir.resolve():
        fail(f"run {run_id!r}: not a run folder inside the runs folder {runs_dir.resolve()}")
    if not folder.is_dir():
        run = open_db(db).get_run(run_id)
        folder = Path(run.out_dir) if run and run.out_dir else folder
    if not folder.is_dir():
        fail(f"no run folder {folder} (run {run_id!r})")
    return folder


def export(
    run: str = typer.Option(..., "--run", help="run id"),
    pool: Pool = typer.Option(Pool.all.value, help="which pool"),
    out: Path = typer.Option(..., "--out", help="JSONL file to write"),
    runs_dir: Path = typer.Option(Path("runs"), help="folder holding run folders"),
    db: str | None = typer.Option(None, help=DB_HELP),
) -> None:
    """Export a run's pool as JSONL (task fields + provenance + pool + statistics).

    Example: rods export --run demo --pool active --out active.jsonl
    """
    from storage.export import EmptyPool, export_pool  # pyarrow: not for `rods --help`
    from storage.pools import PoolsFileError

    with clean_errors(PoolsFileError, EmptyPool):
        check_output_file(out, "--out file")
        n = export_pool(_run_dir(run, db, runs_dir), pool.value, out)
    typer.echo(f"wrote {n} task(s) to {out}")


@runs_app.command("list")
def runs_list(
    json_out: bool = typer.Option(False, "--json", help="print JSON"),
    db: str | None = typer.Option(None, help=DB_HELP),
) -> None:
    """List runs with their live status (checked against the process and its heartbeat); a run whose
    process died before it registered is recorded as failed.

    Example: rods runs list --json
    """
    from rods_lab.status import reconcile_dead_runs, run_status
    from rods_lab.views import build_view

    cdb = open_db(db)
    reconcile_dead_runs(cdb)
    rows = []
    for r in cdb.list_runs():
        status = run_status(cdb, r)
        view = build_view(r.out_dir, status, has_steps=bool(r.step))  # a run still building its model says so
        rows.append(
            {
                "id": r.id,
                "method": r.method,
                "status": status,
                "step": r.step,
                "build": view.text if view else None,
                "created_at": r.created_at,
                "out_dir": r.out_dir,
            }
        )
    if json_out:
        emit_json(rows)
        return
    for r in rows:
        build = f" ({r['build']})" if r["build"] else ""
        typer.echo(f"{r['id']:<24} {r['method']:<8} {r['status']:<9} step={r['step']}{build} {r['out_dir']}")


@runs_app.command("show")
def runs_show(run_id: str, db: str | None = typer.Option(None, help=DB_HELP)) -> None:
    """Show one run: its record, live status, latest step and event counts (JSON).

    Example: rods runs show demo
    """
    from rods_lab.status import run_status
    from storage.reader import RunReader

    cdb = open_db(db)
    run = cdb.get_run(run_id)
    if run is None:
        fail(f"no run {run_id!r}")
    reader = RunReader(run.out_dir)
    events = {"latest_step": reader.latest_step(), "counts": reader.counts()} if reader.exists() else None

    build = read_build_progress(run.out_dir)
    emit_json(
        {
            **run.model_dump(),
            "config": json.loads(run.config),
            "live_status": run_status(cdb, run),
            "build": build.model_dump(mode="json") if build else None,
            "events": events,
        }
    )


@runs_app.command("stop")
def runs_stop(run_id: str, db: str | None = typer.Option(None, help=DB_HELP)) -> None:
    """Stop a run: SIGTERM to its process group; the run is marked stopped.

    Example: rods runs stop demo
    """
    from rods_lab.processes import stop_run

    try:
        sent = stop_run(open_db(db), run_id)
    except KeyError:
        fail(f"no run {run_id!r}")
    typer.echo(f"{'sent SIGTERM to' if sent else 'no live process for'} run {run_id}; marked stopped")


@runs_app.command("audit")
def runs_audit(
    run_id: str,
    out: Path | None = typer.Option(None, "--out", help="file to write: .jsonl or .csv"),
    verify: bool = typer.Option(
        False, "--verify", help="check the trail's hash chain; exit 2 naming the first bad row"
    ),
    expect_head: str | None = typer.Option(
        None, "--expect-head", help="with --verify: a head hash printed earlier, which the trail must still hold"
    ),
    reviewer: list[str] = typer.Option([], help="keep only these reviewers' decisions"),
    outcome: list[str] = typer.Option([], help="keep only these outcomes: pending, claimed, applied, refused"),
    db: str | None = typer.Option(None, help=DB_HELP),
) -> None:
    """Export a run's audit trail (who decided what, when, the outcome with its reason and the step it took
    effect), or check that nobody changed, added or removed its rows by hand.

    Example: rods runs audit demo --out audit.csv --outcome refused; rods runs audit demo --verify
    """
    from storage.curation import AUDIT_FORMATS, audit_bytes, audit_frame, filter_audit

    fmt = out.suffix.lstrip(".").lower() if out else None
    if expect_head and not verify:
        raise typer.BadParameter("goes with --verify", param_hint="--expect-head")
    if out is None and not verify:
        raise typer.BadParameter("give --out FILE (.jsonl or .csv), --verify, or both", param_hint="--out")
    if out is not None and fmt not in AUDIT_FORMATS:
        raise typer.BadParameter(f"must end in .jsonl or .csv, got {out.name!r}", param_hint="--out")
    cdb = open_db(db)
    if cdb.get_run(run_id) is None and not verify:
        fail(f"no run {run_id!r}")
    if verify:
        report = cdb.verify_audit(run_id, expect_head)
        if not report.ok:
            fail(f"run {run_id}: the audit trail was edited by hand: {report.problem}")
        old = f"; {report.unchained} event(s) from before the chain, unchained" if report.unchained else ""
        if cdb.get_run(run_id) is None:
            fail(f"no run {run_id!r}")
        typer.echo(f"run {run_id}: audit trail intact, {report.checked} chained event(s){old}; head {report.head}")
    if out is None:
        return
    with clean_errors():
        check_output_file(out, "--out file")
        trail = filter_audit(audit_frame(cdb.decisions(run_id)), reviewer, outcome)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(audit_bytes(trail, fmt))
    typer.echo(f"wrote {len(trail)} decision(s) to {out}")
