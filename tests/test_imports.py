"""Imports go one way, with no cycles, and modules stay readable: every first-party file's imports (top level,
inside functions, under TYPE_CHECKING, relative) are read with `ast` and checked against the layering
rods_core < storage < rods_lab < app (app.py, pages/) < bench; tests/ are exempt. bench/ holds the scripts that
print figures: they are run (`python -m bench.<script>`, `rods bench` does so), never imported by the project.

Beside the layering: no module-level cycle and no package-level cycle; nothing outside a benchmark's wing (WINGS)
imports it; and a first-party import sits inside a function only where its target loads a HEAVY package (through
its module-level imports, over first-party modules; TYPE_CHECKING blocks and function bodies do not count): the
test computes that closure and refuses any function-local import it does not justify. FUNCTION_LOCAL_LEFT counts
the justified ones; it may only go down."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = {"rods_core": 0, "storage": 1, "rods_lab": 2, "app": 3, "pages": 3, "bench": 4}
LIBRARY_NEVER = ("streamlit", "plotly")  # rods_core draws and serves nothing
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 500, 80
LENGTH_REASON = "Length:"  # why a module (its docstring) or one function (its docstring or def line) is long
# A benchmark's wing: every module that knows its format (tasks, seeds, environment, synthesis, prompts, demo
# data). The rule: nothing outside a wing imports it; the library, storage and the lab see
# rods_core.benchmarks.protocols, and the registry (rods_core.config.benchmark_entries) names each wing's entry as an
# import path ("module:attr"), loaded when the benchmark is built, never imported by name.
WINGS = ("rods_core.benchmarks.bfcl", "rods_core.benchmarks.memory")
# The library's packages in import order, none importing a later one: config (with its leaves: input doors,
# prompt files, the benchmark entries) < benchmarks (the protocol, registry, task files, tool calls, synthesis;
# each wing its own package) < policy (the model stack, model folders) < the library's top-level modules (the
# composition: loop, step, rollout, trainer, tasksets, the model build).
# A first-party import inside a function is allowed for one reason: its cost. Its target loads a HEAVY package
# (through module-level imports, over first-party modules; TYPE_CHECKING blocks and function bodies do not count),
# and the importing module sits on a path that must start fast (`rods --help`, the commands that only list or play
# tasks, the app's pages) or is a CLI command's implementation, loaded when the command runs. Never to dodge a
# cycle: fix the dependency's direction instead. The packages, each needed by some paths only and costing a
# second or more to import, or (sqlmodel, pyarrow) a large share of `rods --help`'s whole ~0.35 s start:
HEAVY = frozenset(
    {
        "torch",  # the model stack: training, generation, SFT
        "transformers",
        "trl",
        "accelerate",
        "peft",  # LoRA adapters
        "vllm",  # the optional generation backend (the [vllm] extra)
        "datasets",  # TRL's trainer inputs
        "pandas",  # data frames (numpy, pyarrow beneath): the app's tables, exports, the analysis
        "streamlit",  # the app's server: pages only
        "openai",  # the LLM synthesis stage's client
        "sqlmodel",  # the control store (SQLAlchemy beneath): ~0.7 s, twice `rods --help`'s whole start
        "pyarrow",  # the event log's columns (numpy beneath): ~0.15 s, near half of `rods --help`'s start
    }
)
# Not heavy, so never a reason: numpy, duckdb, plotly and bfcl_eval (a few tenths or less), pydantic. bench/ scripts import at the top (a script pays its
# imports once); they keep in a function only TRL's trainer where a mode, `--help` or a test's import does
# without it. FUNCTION_LOCAL_LEFT counts every function-local first-party import (each justified by the rule); it
# may only go down.
FUNCTION_LOCAL_LEFT = 33


def module_files(root: Path) -> dict[str, Path]:
    """Module name -> file, for every first-party .py file under `root` (tests excluded)."""
    out: dict[str, Path] = {}
    for top in LAYERS:
        paths = sorted((root / top).rglob("*.py")) if (root / top).is_dir() else [root / f"{top}.py"]
        for p in paths:
            if not p.is_file() or "__pycache__" in p.parts:
                continue
            parts = p.relative_to(root).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def imports_of_node(module: str, path: Path, node: ast.AST, known: set[str]) -> list[str]:
    """The modules one import statement names: a first-party target resolves to the deepest module that exists
    (`from pkg import sub` names pkg.sub), a third-party one to its top name; [] for any other node."""
    if isinstance(node, ast.Import):
        targets = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom):
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        base = node.module or ""
        if node.level:
            anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            base = ".".join(anchor + ([node.module] if node.module else []))
        targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
    else:
        return []
    found = []
    for t in targets:
        while t not in known and "." in t:
            t = t.rpartition(".")[0]
        if t != module:
            found.append(t)
    return found


def imports_of(module: str, path: Path, known: set[str]) -> list[tuple[int, str]]:
    """(line, imported module) for every import in the file, wherever it sits (`imports_of_node`)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return [(node.lineno, t) for node in ast.walk(tree) for t in imports_of_node(module, path, node, known)]


def layer_of(module: str) -> int | None:
    return LAYERS.get(module.split(".")[0])


def layering_violations(root: Path) -> list[str]:
    """'file:line: a -> b' for each edge to a higher layer, and each library import of streamlit or plotly."""
    files = module_files(root)
    bad = []
    for module, path in files.items():
        for line, target in imports_of(module, path, set(files)):
            up = (layer_of(target) or 0) > layer_of(module)
            drawing = layer_of(module) == 0 and target.split(".")[0] in LIBRARY_NEVER
            if up or drawing:
                bad.append(f"{path.relative_to(root)}:{line}: {module} -> {target}")
    return bad


def import_cycles(root: Path) -> list[list[str]]:
    """Each strongly connected set of first-party modules with more than one member (Tarjan), or a self-import."""
    files = module_files(root)
    return strongly_connected(
        {m: sorted({t for _, t in imports_of(m, p, set(files)) if t in files}) for m, p in files.items()}
    )


def wing_of(module: str) -> str | None:
    """The wing (WINGS) a module belongs to, or None."""
    return next((w for w in WINGS if module == w or module.startswith(w + ".")), None)


def package_of(module: str, path: Path) -> str:
    """The package a module counts in for the package-level cycle check: its wing, else its own package."""
    return wing_of(module) or (module if path.name == "__init__.py" else module.rpartition(".")[0] or module)


def package_cycles(root: Path) -> list[list[str]]:
    """Each strongly connected set of first-party packages: a module of one imports a module of the other."""
    files = module_files(root)
    graph: dict[str, set[str]] = {}
    for m, p in files.items():
        for _, t in imports_of(m, p, set(files)):
            if t in files:
                a, b = package_of(m, p), package_of(t, files[t])
                graph.setdefault(a, set())
                graph.setdefault(b, set())
                if a != b:
                    graph[a].add(b)
    return strongly_connected({k: sorted(v) for k, v in graph.items()})


def wing_imports_from_outside(root: Path) -> list[str]:
    """'file:line: a -> b' for each import of a wing's module by a module outside that wing."""
    files = module_files(root)
    return [
        f"{path.relative_to(root)}:{line}: {module} -> {target}"
        for module, path in files.items()
        for line, target in imports_of(module, path, set(files))
        if wing_of(target) and wing_of(target) != wing_of(module)
    ]


def _local_import_nodes(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """The import statements inside a function's body (nested functions and classes included)."""
    return [
        node
        for fn in ast.walk(tree)
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
        for node in ast.walk(fn)
        if isinstance(node, (ast.Import, ast.ImportFrom))
    ]


def _function_local(root: Path) -> list[tuple[str, str, str]]:
    """(where 'file:line', importing module, first-party target) for each first-party import inside a function."""
    files = module_files(root)
    known = set(files)
    out = set()
    for module, path in files.items():
        for node in _local_import_nodes(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            where = f"{path.relative_to(root)}:{node.lineno}"
            out |= {(where, module, t) for t in imports_of_node(module, path, node, known) if t in known}
    return sorted(out)


def function_local_imports(root: Path) -> list[str]:
    """'file:line: a -> b' for each first-party import inside a function's body (nested ones included)."""
    return [f"{where}: {module} -> {target}" for where, module, target in _function_local(root)]


def _is_type_checking(test: ast.expr) -> bool:
    """`if TYPE_CHECKING:` or `if typing.TYPE_CHECKING:`."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _loaded_statements(body: list[ast.stmt]):
    """The statements Python runs when it loads a module: its body, into class bodies, if/else, try and with
    blocks, never into a function's body nor a TYPE_CHECKING block (its `else` does run)."""
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        yield stmt
        if isinstance(stmt, ast.If) and _is_type_checking(stmt.test):
            yield from _loaded_statements(stmt.orelse)
            continue
        for name in ("body", "orelse", "finalbody"):
            yield from _loaded_statements(getattr(stmt, name, []) or [])
        for handler in getattr(stmt, "handlers", []) or []:
            yield from _loaded_statements(handler.body)


def load_imports(root: Path) -> dict[str, set[str]]:
    """Module -> what importing it loads directly: the modules (first-party) and top-level packages (third-party)
    its module-level imports name (`_loaded_statements`), and its parent packages, whose `__init__` runs first."""
    files = module_files(root)
    known = set(files)
    out = {}
    for module, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        found = {t for stmt in _loaded_statements(tree.body) for t in imports_of_node(module, path, stmt, known)}
        parts = module.split(".")
        found |= {p for p in (".".join(parts[:i]) for i in range(1, len(parts))) if p in known}
        out[module] = found - {module}
    return out


def heavy_loads(root: Path) -> dict[str, set[str]]:
    """Module -> the HEAVY packages importing it loads, over first-party modules' module-level imports."""
    direct = load_imports(root)
    out = {}
    for module in direct:
        seen, todo, heavy = {module}, [module], set()
        while todo:
            for t in direct[todo.pop()]:
                if t in direct:
                    if t not in seen:
                        seen.add(t)
                        todo.append(t)
                elif t in HEAVY:
                    heavy.add(t)
        out[module] = heavy
    return out


def light_function_local_imports(root: Path) -> list[str]:
    """'file:line: a -> b' for each function-local first-party import whose target loads no HEAVY package: an
    import the rule (HEAVY) does not justify; it belongs at the top of the module."""
    heavy = heavy_loads(root)
    return [f"{where}: {module} -> {target}" for where, module, target in _function_local(root) if not heavy[target]]


def strongly_connected(graph: dict[str, list[str]]) -> list[list[str]]:
    """Each strongly connected set of a graph's nodes with more than one member (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def long_without_reason(root: Path) -> list[str]:
    """Modules over MAX_MODULE_LINES without a `Length:` reason in their docstring, and functions whose body runs
    over MAX_FUNCTION_LINES without one of their own: in the function's docstring or a comment on its signature
    (`def f(...):  # Length: ...`). A module's reason covers the module's length only, never its functions.
    A function counts from its first body line: a CLI command's option declarations are its signature."""
    out = []
    for path in module_files(root).values():
        text = path.read_text(encoding="utf-8")
        lines, tree = text.splitlines(), ast.parse(text)
        where = path.relative_to(root)
        if len(lines) > MAX_MODULE_LINES and LENGTH_REASON not in (ast.get_docstring(tree) or ""):
            out.append(f"{where}: {len(lines)} lines")
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.body[0].lineno + 1
                signature = "\n".join(lines[node.lineno - 1 : node.body[0].lineno - 1])
                reason = LENGTH_REASON in (ast.get_docstring(node) or "") or f"# {LENGTH_REASON}" in signature
                if n > MAX_FUNCTION_LINES and not reason:
                    out.append(f"{where}:{node.lineno}: {node.name} is {n} lines")
    return out


def imports_of_bench(root: Path) -> list[str]:
    """'file:line: a -> bench.x' for each first-party module outside bench/ (tests/ are not read) that imports bench."""
    files = module_files(root)
    return [
        f"{path.relative_to(root)}:{line}: {module} -> {target}"
        for module, path in files.items()
        if layer_of(module) != LAYERS["bench"]
        for line, target in imports_of(module, path, set(files))
        if target.split(".")[0] == "bench"
    ]


def test_imports_follow_the_layering():
    bad = layering_violations(ROOT)
    assert not bad, "imports against rods_core < storage < rods_lab < app < bench:\n" + "\n".join(bad)


def test_nothing_imports_bench():
    """bench/ is scripts that print figures: the lab runs them (`python -m bench.<script>`), never imports them."""
    bad = imports_of_bench(ROOT)
    assert not bad, "first-party modules importing bench (run the script, or move the code into the lab):\n" + (
        "\n".join(bad)
    )


def test_the_bench_check_sees_an_import_inside_a_function(tmp_path):
    root = _tree(
        tmp_path,
        {
            "bench/__init__.py": "",
            "bench/b.py": "from rods_lab import r\n",
            "rods_lab/__init__.py": "",
            "rods_lab/r.py": "def f():\n    from bench import b\n",
        },
    )
    assert imports_of_bench(root) == ["rods_lab/r.py:2: rods_lab.r -> bench.b"]


def test_no_import_cycles():
    cycles = import_cycles(ROOT)
    assert not cycles, "import cycles among first-party modules:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_no_package_import_cycles():
    cycles = package_cycles(ROOT)
    assert not cycles, "packages in an import cycle (fix the dependency's direction):\n" + "\n".join(map(str, cycles))


def test_nothing_outside_a_wing_imports_it():
    found = wing_imports_from_outside(ROOT)
    assert not found, (
        f"{len(found)} imports of a benchmark's wing from outside it; go through rods_core.benchmarks.protocols or "
        "the registry instead:\n" + "\n".join(found)
    )


def test_function_local_first_party_imports_no_more_than_left():
    found = function_local_imports(ROOT)
    assert len(found) <= FUNCTION_LOCAL_LEFT, (
        f"{len(found)} first-party imports inside functions (left: {FUNCTION_LOCAL_LEFT}); the only reason for one "
        "is import cost (see HEAVY), never a cycle: import at the top or fix the direction:\n" + "\n".join(found)
    )


def test_function_local_imports_only_of_heavy_targets():
    light = light_function_local_imports(ROOT)
    assert not light, (
        f"{len(light)} first-party imports inside functions whose target loads none of HEAVY; import them at the "
        "top of the module:\n" + "\n".join(light)
    )


def test_the_heavy_rule_flags_light_targets_only(tmp_path):
    """A target is heavy when loading it loads a HEAVY package: directly, through a first-party module's top-level
    import (in a try block too), through its parent package or around a cycle; a TYPE_CHECKING import and an
    import inside a function load nothing."""
    root = _tree(
        tmp_path,
        {
            "rods_core/__init__.py": "",
            "rods_core/light.py": (
                "import json\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import torch\n\n\n"
                "def f():\n    import pandas\n"
            ),
            "rods_core/model.py": "import torch\n",
            "rods_core/wrapper.py": "try:\n    from . import model\nexcept ImportError:\n    model = None\n",
            "rods_core/cyc_a.py": "from rods_core import cyc_b\n",
            "rods_core/cyc_b.py": "from rods_core import cyc_a\nimport streamlit as st\n",
            "rods_core/policy/__init__.py": "from transformers import AutoModel\n",
            "rods_core/policy/tiny.py": "",
            "storage/__init__.py": "",
            "storage/user.py": "".join(
                f"def f{i}():\n    {stmt}\n"
                for i, stmt in enumerate(
                    [
                        "from rods_core import light",
                        "from rods_core import wrapper",
                        "from rods_core.policy import tiny",
                        "from rods_core import cyc_a",
                        "import rods_core.model",
                    ]
                )
            ),
        },
    )
    heavy = heavy_loads(root)
    assert heavy["rods_core.light"] == set()
    assert heavy["rods_core.wrapper"] == {"torch"}
    assert heavy["rods_core.policy.tiny"] == {"transformers"}
    assert heavy["rods_core.cyc_a"] == heavy["rods_core.cyc_b"] == {"streamlit"}
    assert len(function_local_imports(root)) == 5
    assert light_function_local_imports(root) == ["storage/user.py:2: storage.user -> rods_core.light"]


def test_no_long_module_or_function_without_a_reason():
    long = long_without_reason(ROOT)
    assert not long, (
        f"over {MAX_MODULE_LINES} lines per module or {MAX_FUNCTION_LINES} per function, with no "
        f"'{LENGTH_REASON}' reason (split it, or say why: in the module's docstring for a module, in the "
        "function's docstring or on its def line for a function):\n" + "\n".join(long)
    )


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_checks_see_function_level_type_checking_and_relative_imports(tmp_path):
    root = _tree(
        tmp_path,
        {
            "rods_core/__init__.py": "",
            "rods_core/a.py": "def f():\n    from storage import s\n",
            "rods_core/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import c\n",
            "rods_core/c.py": "def g():\n    import rods_core.b\n",
            "rods_core/d.py": "import plotly.graph_objects as go\n",
            "storage/__init__.py": "",
            "storage/s.py": "from rods_core import a\n",
        },
    )
    assert layering_violations(root) == [
        "rods_core/a.py:2: rods_core.a -> storage.s",
        "rods_core/d.py:1: rods_core.d -> plotly",
    ]
    assert sorted(import_cycles(root)) == [["rods_core.a", "storage.s"], ["rods_core.b", "rods_core.c"]]


@pytest.mark.parametrize(
    "module_doc, signature, doc, expected",
    [
        ("", "", "", 1),
        ("\n\nLength: one table per page.", "", "", 1),  # a module's reason does not cover its functions
        ("", "  # Length: one table per page.", "", 0),
        ("", "", '    """Lay out the page.\n\n    Length: one table per page."""\n', 0),
    ],
)
def test_long_function_needs_its_own_reason(tmp_path, module_doc, signature, doc, expected):
    body = doc + "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES + 1))
    text = f'"""A bench.{module_doc}"""\n\n\ndef f(\n    a=1,\n):{signature}\n{body}\n\ndef g():\n    return 1\n'
    root = _tree(tmp_path, {"bench/__init__.py": "", "bench/m.py": text})
    assert len(long_without_reason(root)) == expected


@pytest.mark.parametrize("reason, expected", [("", 1), ("\n\nLength: one store, one transaction rule.", 0)])
def test_long_module_needs_a_reason_in_its_docstring(tmp_path, reason, expected):
    body = "".join(f"x{i} = {i}\n" for i in range(MAX_MODULE_LINES + 1))
    root = _tree(tmp_path, {"bench/__init__.py": "", "bench/m.py": f'"""A bench.{reason}"""\n\n{body}'})
    assert len(long_without_reason(root)) == expected


def test_wing_package_and_function_local_checks_see_their_imports(tmp_path):
    root = _tree(
        tmp_path,
        {
            "rods_core/__init__.py": "",
            "rods_core/loop.py": "def f():\n    from rods_core.benchmarks.bfcl import tasks\n",
            "rods_core/benchmarks/__init__.py": "",
            "rods_core/benchmarks/protocols.py": "",
            "rods_core/benchmarks/bfcl/__init__.py": "",
            "rods_core/benchmarks/bfcl/tasks.py": "from rods_core.benchmarks import protocols\n",
            "rods_core/benchmarks/bfcl/seeds.py": "from rods_core.benchmarks.bfcl import tasks\nimport rods_core.loop\n",
        },
    )
    assert wing_imports_from_outside(root) == ["rods_core/loop.py:2: rods_core.loop -> rods_core.benchmarks.bfcl.tasks"]
    assert function_local_imports(root) == ["rods_core/loop.py:2: rods_core.loop -> rods_core.benchmarks.bfcl.tasks"]
    assert package_cycles(root) == [["rods_core", "rods_core.benchmarks.bfcl"]]
