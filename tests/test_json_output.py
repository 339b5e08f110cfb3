"""Every command that prints JSON prints exactly one JSON document on stdout, run as users run it (a
process through `python -m rods_lab.cli`, WANDB_MODE=offline as the project sets it): libraries' chatter
(transformers' "[INFO] Running in WANDB offline mode" at import, TRL's step logs) goes to stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from rods_core.benchmarks.bfcl.seeds import load_seeds
from rods_lab.cli import app
from rods_lab.cli._common import DOCUMENT_COMMANDS, prints_document
from storage.control import ControlDB

ROOT = Path(__file__).resolve().parents[1]


def _commands(group, path: tuple[str, ...] = ()):
    for name, cmd in group.commands.items():
        if hasattr(cmd, "commands"):  # a group (typer carries its own click)
            yield from _commands(cmd, (*path, name))
        else:
            yield (*path, name), cmd


def json_commands() -> set[tuple[str, ...]]:
    """The command paths with a --json option, and those that always print a document."""
    tree = typer.main.get_command(app)
    flagged = {p for p, cmd in _commands(tree) if any("--json" in o.opts for o in cmd.params)}
    return flagged | set(DOCUMENT_COMMANDS)


def rods(*args: str, cwd: Path = ROOT) -> dict | list:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "WANDB_MODE": "offline"}
    done = subprocess.run(
        [sys.executable, "-m", "rods_lab.cli", *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)  # the whole of stdout: one document, nothing before or after


@pytest.fixture(scope="module")
def files(tmp_path_factory, tiny_model_dir):
    tmp = tmp_path_factory.mktemp("json")
    seeds = load_seeds("train")
    task = seeds[0]
    answers = tmp / "answers.jsonl"
    answers.write_text(json.dumps({"id": task.id, "turns": task.ground_truth}) + "\n")
    tasks = tmp / "one.jsonl"
    tasks.write_text(task.model_dump_json() + "\n")
    db = tmp / "control.sqlite"
    ControlDB(db).create_run("r1", tmp / "runs" / "r1", config={"method": "rods"})
    summaries = tmp / "summaries"  # run summaries as `rods bench paper --summaries` writes them: 2 replicates
    summaries.mkdir()
    for k, (arm, rise) in enumerate([(a, r) for a, r in (("rods", 0.1), ("static", 0.0)) for _ in range(2)]):
        evals = [{"step": 0, "set": "H1", "progress": 0.3}, {"step": 10, "set": "H1", "progress": 0.3 + rise}]
        shares = {"boundary/informative_share": [0.6] * 12 + [0.4] * 188}
        (summaries / f"{arm}_r{k % 2}.json").write_text(json.dumps(
            {"arm": arm, "run": f"{arm}_r{k % 2}", "replicate": k % 2, "evaluations": evals, "steps": {"per_step": shares}}
        ))  # fmt: skip
    return {"tmp": tmp, "model": tiny_model_dir, "answers": answers, "tasks": tasks, "db": db, "seed": task.id,
            "summaries": summaries}  # fmt: skip


def cases(f) -> dict[tuple[str, ...], list[str]]:
    """One cheap command line per JSON-printing command (the tiny untrained model where a model is needed)."""
    tmp, model = f["tmp"], str(f["model"])
    return {
        ("seeds", "stats"): ["--split", "test", "--json"],
        ("env", "replay"): ["--split", "test", "--json"],
        ("env", "score"): ["--answers", str(f["answers"]), "--json"],
        ("model", "init-tiny"): ["--out", str(tmp / "m"), "--hidden", "32", "--layers", "1", "--heads", "2"]
        + ["--kv-heads", "1", "--ffn", "64", "--vocab", "600", "--json"],
        ("eval",): ["--model", model, "--split", "test", "--limit", "1", "--json"],
        ("sft",): ["--model", model, "--out", str(tmp / "sft"), "--tasks", str(f["tasks"])]
        + ["--max-epochs", "1", "--samples", "0", "--json"],
        ("synth",): ["--from", f["seed"], "--n", "1", "--out", str(tmp / "v.jsonl"), "--json"],
        ("runs", "list"): ["--db", str(f["db"]), "--json"],
        ("runs", "show"): ["r1", "--db", str(f["db"])],
        ("bench", "env"): ["--repeats", "1"],
        ("bench", "store"): ["--rows", "1000", "--tasks-per-step", "100", "--out", str(tmp / "store")],
        ("bench", "pool-criteria"): [str(f["summaries"]), "--json"],
        ("bench", "pilot-length"): [str(f["summaries"])],
        ("bench", "systems"): ["--json", "--quick", "--steps", "2", "--model", model]
        + ["--config", str(ROOT / "configs/demo-cpu.yaml")],
    }


SLOW = {("sft",), ("bench", "systems")}  # they train a few steps of the tiny model
PATHS = sorted(cases(dict.fromkeys(("tmp", "model", "answers", "tasks", "db", "seed", "summaries"), Path("x"))))


def test_every_json_command_has_a_case():
    """A new command with --json (or one that always prints JSON) needs a line in cases()."""
    assert json_commands() == set(PATHS)


def test_prints_document_reads_the_command_line():
    assert prints_document(["eval", "--model", "m", "--json"]) and prints_document(["runs", "show", "r1"])
    assert prints_document(["bench", "store", "--rows", "1000"]) and not prints_document(["runs", "list"])
    assert not prints_document(["bench", "systems"])


@pytest.mark.parametrize("path", [pytest.param(p, marks=pytest.mark.slow) if p in SLOW else p for p in PATHS])
def test_stdout_is_one_json_document(path, files):
    doc = rods(*path, *cases(files)[path], cwd=files["tmp"])
    assert isinstance(doc, dict | list) and doc


def test_chatter_goes_to_stderr_and_the_document_to_stdout(capfd):
    """What transformers prints at import when WANDB_MODE=offline, a print and a child process's output:
    all on stderr; emit_json's document alone on stdout."""
    from rods_lab.cli._common import emit_json, one_document

    with one_document():
        print("[INFO] Running in WANDB offline mode")
        subprocess.run([sys.executable, "-c", "print('a child process')"], check=True)
        emit_json({"ok": True})
    out, err = capfd.readouterr()
    assert json.loads(out) == {"ok": True}
    assert "WANDB offline" in err and "a child process" in err


def test_a_command_that_execs_another_gives_it_the_real_stdout(capfd):
    """`--processes N` replaces the process by accelerate's launcher: its ranks print the document, so fd 1 goes
    back to the real stdout before the exec (a child stands in for the exec'd command here)."""
    from rods_lab.cli._common import one_document, stdout_for_exec

    with one_document():
        print("chatter")
        stdout_for_exec()
        subprocess.run([sys.executable, "-c", "print('{}')"], check=True)
    out, err = capfd.readouterr()
    assert json.loads(out) == {} and "chatter" in err
