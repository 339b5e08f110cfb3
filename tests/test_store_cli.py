"""`rods export`, `rods seeds import`, `rods runs list|show|stop`, `rods bench store` through the CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from rods_core.benchmarks.bfcl.tasks import Task
from rods_core.benchmarks.task_files import read_tasks
from rods_core.process_identity import process_start
from rods_lab.cli import app
from rods_lab.status import run_status
from storage.control import ControlDB
from storage.events import EventLog
from storage.pools import write_pools_snapshot

runner = CliRunner()


@pytest.mark.parametrize(
    "args", [["export"], ["seeds", "import"], ["runs", "list"], ["runs", "show"], ["runs", "stop"], ["bench", "store"]]
)
def test_help(args):
    res = runner.invoke(app, [*args, "--help"])
    assert res.exit_code == 0 and "Example:" in res.output


def test_runs_list_show_stop(tmp_path):
    db = tmp_path / "control.sqlite"
    cdb = ControlDB(db)
    run_dir = tmp_path / "runs" / "r1"
    cdb.create_run("r1", run_dir, config={"method": "rods"})
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    cdb.register_process("r1", proc.pid, process_start(proc.pid))
    with EventLog(run_dir) as log:
        log.append("step", {"step": 0, "reward/mean": 0.1})
    res = runner.invoke(app, ["runs", "list", "--json", "--db", str(db)])
    assert res.exit_code == 0 and json.loads(res.output)[0]["status"] == "running"
    shown = json.loads(runner.invoke(app, ["runs", "show", "r1", "--db", str(db)]).output)
    assert shown["events"]["latest_step"] == 0 and shown["config"] == {"method": "rods"}
    res = runner.invoke(app, ["runs", "stop", "r1", "--db", str(db)])
    assert res.exit_code == 0 and "sent SIGTERM" in res.output
    assert proc.wait(timeout=10) < 0 and run_status(cdb, "r1") == "stopped"
    res = runner.invoke(app, ["runs", "show", "nope", "--db", str(db)])
    assert res.exit_code == 2 and "no run 'nope'" in res.output
    # a store given as a URL that cannot be reached: its name (password hidden), the reason, the fix
    res = runner.invoke(app, ["runs", "list", "--db", "postgresql+psycopg://lab:hunter2@127.0.0.1:1/rods"])
    assert res.exit_code == 2 and "lab:***@127.0.0.1:1/rods: cannot open it" in res.output
    assert "hunter2" not in res.output and "RODS_CONTROL_DB" in res.output


def test_runs_list_records_a_run_that_died_before_registering(tmp_path):
    db = tmp_path / "control.sqlite"
    cdb = ControlDB(db)
    dead = subprocess.Popen(["true"])
    dead.wait()
    run_dir = tmp_path / "runs" / "r0"
    run_dir.mkdir(parents=True)
    (run_dir / "train.log").write_text("ImportError: no module named x\n")
    cdb.create_run("r0", run_dir, config={"method": "rods"})
    cdb.update_run("r0", pid=dead.pid)
    assert cdb.get_run("r0").status == "queued"
    res = runner.invoke(app, ["runs", "list", "--json", "--db", str(db)])
    assert res.exit_code == 0 and json.loads(res.output)[0]["status"] == "failed"
    assert (cdb.get_run("r0").status, cdb.get_run("r0").message) == ("failed", "ImportError: no module named x")


def test_export_and_import_commands(tmp_path, train_seeds, all_seeds):
    runs = tmp_path / "runs"
    write_pools_snapshot(runs / "r2", {"active": train_seeds[:5], "seeds": train_seeds[5:8]}, step=1)
    out = tmp_path / "active.jsonl"
    res = runner.invoke(app, ["export", "--run", "r2", "--pool", "active", "--out", str(out), "--runs-dir", str(runs)])
    assert res.exit_code == 0, res.output
    assert [t.id for t in read_tasks(out, Task)] == [t.id for t in train_seeds[:5]]
    res = runner.invoke(app, ["export", "--run", "r2", "--pool", "hot", "--out", str(out), "--runs-dir", str(runs)])
    assert res.exit_code == 2 and "is not one of" in res.output

    db = tmp_path / "control.sqlite"
    res = runner.invoke(app, ["seeds", "import", str(out), "--db", str(db), "--tag", "demo"])
    assert res.exit_code == 0 and "imported 5 new" in res.output
    test_task = next(t for t in all_seeds if t.id not in {s.id for s in train_seeds})
    leak = tmp_path / "leak.jsonl"
    leak.write_text(out.read_text() + json.dumps(test_task.to_record()) + "\n")
    res = runner.invoke(app, ["seeds", "import", str(leak), "--db", str(db)])
    assert res.exit_code == 2 and "test split" in res.output
    assert len(ControlDB(db).list_seeds()) == 5
