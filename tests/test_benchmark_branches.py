"""No benchmark-name or task-type branch anywhere but the registry (rods_core/benchmarks/registry.py, where a
name becomes a benchmark): the library, the app and the benchmarks' shared modules (synthesis worker, edits)
go through the Benchmark protocol (seeds, leak guard, synthesizer, verify, import and edit checks, group,
facts, structure, distance, declared options).

The pattern is the before-stop hook's plus `kind is Task`, a `benchmark is None` default and an isinstance on
a benchmark's own classes. No branch is left: a new one anywhere fails (REMAINING stays empty; what differs
between benchmarks goes behind the protocol)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCOPE = ("rods_core", "storage", "rods_lab", "bench", "pages", "app.py")
BRANCH = re.compile(
    r'[!=]= "bfcl_multi_turn"|isinstance\([a-z_]+, Task\)|kind is (not )?Task|task_type is (not )?Task'
    r"|benchmark is (not )?None|isinstance\([a-z_.]+, (Bfcl|Memory)\w*\)"
)
REMAINING: set[tuple[str, str]] = set()  # every branch moved behind the Benchmark protocol; keep it empty


def branches() -> set[tuple[str, str]]:
    found = set()
    for top in SCOPE:
        root = ROOT / top
        for path in [root] if root.is_file() else sorted(root.rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel == "rods_core/benchmarks/registry.py":
                continue
            for line in path.read_text(encoding="utf-8").splitlines():
                if BRANCH.search(line):
                    found.add((rel, line.strip()))
    return found


def test_no_new_benchmark_name_or_task_type_branch_outside_the_benchmarks_package():
    found = branches()
    assert not found - REMAINING, (
        f"branch on a benchmark's name or task type; let the Benchmark carry it: {found - REMAINING}"
    )
    assert not REMAINING - found, f"removed: take it off REMAINING: {REMAINING - found}"


def test_the_pattern_catches_each_form_it_names():
    for line in (
        'if cfg.benchmark == "bfcl_multi_turn":',
        'if bench.name != "bfcl_multi_turn":',
        "if isinstance(task, Task):",
        "parse = parse_record if kind is Task else x",
        "if self.task_type is not Task:",
        "x = a if benchmark is None else b",
        "if isinstance(synthesizer, BfclPipelineSynthesizer):",
        "if isinstance(bench.synthesizer, MemoryTemplateSynthesizer):",
    ):
        assert BRANCH.search(line), line
