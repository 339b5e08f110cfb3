"""The library side of `rods synth`: find the parent, build the config, run, write, report."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from rods_core.benchmarks.bfcl.seeds import leak_guard, load_seeds
from rods_core.benchmarks.bfcl.synth.pipeline import synthesize
from rods_core.benchmarks.bfcl.tasks import Task
from rods_core.benchmarks.task_files import read_tasks, write_tasks
from rods_core.config import SynthesisConfig
from rods_core.config.synth import renamed_sections


def find_parent(task_id: str, tasks_file: Path | None) -> Task:
    """A train-split seed or a task of `tasks_file`; test-split tasks are refused by id and by content."""
    guard = leak_guard()
    if task_id in guard.ids:
        raise ValueError(
            f"{task_id} is in the held-out test split; synthesizing from it would leak the test set into training"
        )
    pool = read_tasks(tasks_file, Task) if tasks_file else load_seeds("train")
    found = [t for t in pool if t.id == task_id]
    if not found:
        where = str(tasks_file) if tasks_file else "the train-split seeds"
        raise ValueError(f"no task {task_id!r} in {where}")
    reason = guard.reason(found[0])
    if reason:
        raise ValueError(f"{task_id}: {reason}; refusing to synthesize from a test-split task")
    return found[0]


def load_config(path: Path | None, *, seed: int, backend: str, n: int) -> SynthesisConfig:
    """A SynthesisConfig from a YAML/JSON file (a run config's `synthesis:` section, or the fields alone) and the
    command's options; every problem is a ValueError naming the file (and field)."""
    data: dict = {}
    if path:
        text = Path(path).read_text(encoding="utf-8")
        if path.suffix in (".yaml", ".yml"):
            import yaml

            try:
                data = yaml.safe_load(text) or {}
            except yaml.YAMLError as e:
                raise ValueError(f"{path}: not valid YAML: {e}") from None
        else:
            try:
                data = json.loads(text)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}: not valid JSON: {e.msg} (line {e.lineno})") from None
        if isinstance(data, dict) and ("synthesis" in data or "synth" in data):  # a run config: its section
            data = renamed_sections(data, str(path)).get("synthesis")
        if not isinstance(data, dict):
            raise ValueError(
                f"{path}: expected a mapping of SynthesisConfig fields (or a run config with `synthesis:`)"
            )
    data = {**data, "seed": seed, "backend": backend, "n_per_parent": n}
    try:
        return SynthesisConfig.model_validate(data)
    except ValidationError as e:
        where = f"{path}: " if path else ""
        raise ValueError(where + "; ".join(f"{'.'.join(map(str, x['loc']))}: {x['msg']}" for x in e.errors())) from None


def run(parent: Task, cfg: SynthesisConfig, out: Path, tasks_file: Path | None = None) -> dict:
    """Synthesize, write the accepted variants, and report; nothing already in the seeds or the task
    file is produced again."""
    pool = load_seeds("train") + (read_tasks(tasks_file, Task) if tasks_file else [])
    pool_keys = {t.content_key() for t in pool}
    result = synthesize(parent, cfg.n_per_parent, pool_keys, cfg)
    write_tasks(out, result.accepted)
    return {
        "parent": parent.id,
        "accepted": len(result.accepted),
        "attempts": len(result.attempts),
        "out": str(out),
        "stages": result.counts(),
        "variants": [
            {"id": a.variant.id, "distance": a.distance, "note": a.variant.provenance.note}
            for a in result.attempts
            if a.variant is not None
        ],
    }


def render_counts(report: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(
        f"[bold]{report['accepted']}[/] variant(s) of {report['parent']} in {report['attempts']} attempt(s) -> {report['out']}"
    )
    table = Table("stage", "accepted", "rejected", "top reasons")
    for stage, c in report["stages"].items():
        reasons = "; ".join(f"{r} ({k})" for r, k in list(c["reasons"].items())[:3])
        table.add_row(stage, str(c["accepted"]), str(c["rejected"]), reasons)
    console.print(table)
