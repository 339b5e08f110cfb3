"""The benchmarks a run config may name: the ones this repository ships and any a lab adds, by a call
(`register_benchmark`) or by an installed package's entry point in the group "rods.benchmarks".

A leaf module (no benchmark module imported), so the run config checks a `benchmark:` name, the shared run
fields it allows (`options`) and its own options (`options_model`, a pydantic model: `benchmark_options:`) here,
at validation. An entry names its factory, task model and options model either as objects or, as an entry point
does, as import paths ("module:attr") imported when first needed: naming a benchmark never loads its code (BFCL
memory's modules load bfcl-eval's memory code), and the benchmarks' modules may import the config.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

ENTRY_POINT_GROUP = "rods.benchmarks"  # named for the `rods` command: it names no module
# The shared run fields only some benchmarks use; the config refuses each on a benchmark that does not declare
# it. A benchmark's own options are not listed here: they are its entry's options model.
KNOWN_OPTIONS = frozenset({"hints", "demo_seeds", "categories", "sft_variants"})
# What make_benchmark offers a factory; it receives those its signature names (all of them with **kwargs);
# `options` is its validated options model.
SETTINGS = ("prompt", "max_steps_per_turn", "hints", "options", "synth", "scratch")

# Run fields that became a benchmark's own option, with the value every saved run config carries: still read at
# the top level (`prereq: fact`, `--set prereq=fact`) as `benchmark_options.<name>`.
LEGACY_OPTIONS = {"prereq": "all"}


class NoOptions(BaseModel):
    """The options model of a benchmark without options of its own: any `benchmark_options` key is refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def _resolve(ref: Any) -> Any:
    """The object an import path ("module:attr", an entry point's form) names, or `ref` itself."""
    if not isinstance(ref, str):
        return ref
    module, _, attr = ref.partition(":")
    obj = importlib.import_module(module)
    for part in attr.split(".") if attr else ():
        obj = getattr(obj, part)
    return obj


@dataclass(frozen=True)
class BenchmarkEntry:
    """One benchmark by name: how to build it, its task model, and the run options it has."""

    name: str
    factory: Callable[..., Any] | str  # builds the Benchmark; called with the SETTINGS its signature names
    task_type: type | str  # the task model, for readers of a run's records that never build the benchmark
    options: frozenset[str] = frozenset()  # of KNOWN_OPTIONS: the run fields the config lets a run set on it
    description: str = ""  # one line for a chooser
    options_model: type[BaseModel] | str = NoOptions  # its own options (`benchmark_options:`), given to its factory

    def problem(self) -> str | None:
        """Why this entry cannot be registered, or None."""
        if not self.name or not self.name.replace("_", "").replace("-", "").isalnum():
            return f"benchmark name {self.name!r}: use letters, digits, '_' or '-'"
        if not (callable(self.factory) or (isinstance(self.factory, str) and ":" in self.factory)):
            return f"benchmark {self.name!r}: factory must be callable or a 'module:attr' path"
        unknown = sorted(set(self.options) - KNOWN_OPTIONS)
        if unknown:
            return f"benchmark {self.name!r}: unknown options {unknown}; choose among {sorted(KNOWN_OPTIONS)}"
        return None

    def load_options_model(self) -> type[BaseModel]:
        return _resolve(self.options_model)

    def option_names(self) -> tuple[str, ...]:
        """The names of its own options (the fields of its options model)."""
        return tuple(self.load_options_model().model_fields)

    def validate_options(self, given: BaseModel | dict[str, Any] | None) -> BaseModel:
        """Its options model of `given` (None: the defaults); ValueError naming `benchmark_options.<field>`, the
        reason and the fields it has."""
        model = self.load_options_model()
        if isinstance(given, model):
            return given
        data = given.model_dump() if isinstance(given, BaseModel) else dict(given or {})
        try:
            return model.model_validate(data)
        except ValidationError as e:
            fields = ", ".join(model.model_fields) or "none"
            problems = "; ".join(
                f"benchmark_options.{'.'.join(str(p) for p in err['loc']) or '(all)'}: {err['msg']}"
                for err in e.errors()
            )
            raise ValueError(f"{problems} (the options of benchmark {self.name}: {fields})") from None

    def build(self, **settings: Any) -> Any:
        """The benchmark, its factory given the settings (of SETTINGS) its signature names."""
        factory = _resolve(self.factory)
        params = inspect.signature(factory).parameters.values()
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            names = {p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
            settings = {k: v for k, v in settings.items() if k in names}
        bench = factory(**settings)
        if getattr(bench, "name", self.name) != self.name:
            raise ValueError(f"benchmark {self.name!r}: its factory built one named {bench.name!r}")
        return bench

    def load_task_type(self) -> type:
        return _resolve(self.task_type)


_ENTRIES: dict[str, BenchmarkEntry] = {}
_NOT_LOADED: dict[str, str] = {}  # entry point name -> why it was not registered
_discovered = False


def register_benchmark(
    name: str,
    factory: Callable[..., Any] | str,
    *,
    task_type: type | str,
    options: Iterable[str] = (),
    description: str = "",
    options_model: type[BaseModel] | str = NoOptions,
    replace: bool = False,
) -> BenchmarkEntry:
    """Make `name` a benchmark a run config (`benchmark: name`), the CLI and the app can name, in this
    process. `factory` builds it (a class or function; given the SETTINGS it names), `task_type` is its task
    model, `options` the shared run fields it uses (KNOWN_OPTIONS), `options_model` a pydantic model of its own
    options (a run's `benchmark_options:`, validated by it and given to `factory` as `options`). A name already
    registered is refused unless `replace`. An installed package registers through an entry point instead (docs/benchmarks.md)."""
    entry = BenchmarkEntry(name, factory, task_type, frozenset(options), description, options_model)
    problem = entry.problem()
    if not problem and name in _ENTRIES and not replace:
        problem = f"benchmark {name!r} is already registered (pass replace=True to replace it)"
    if problem:
        raise ValueError(problem)
    _ENTRIES[name] = entry
    return entry


def unregister_benchmark(name: str) -> None:
    """Forget `name` in this process (a test's benchmark, after the test)."""
    _ENTRIES.pop(name, None)


def discover_benchmarks(*, again: bool = False) -> dict[str, str]:
    """Register every installed entry point of ENTRY_POINT_GROUP (once per process; `again` reads them anew):
    each names a BenchmarkEntry whose name is the entry point's. Returns why each one that did not register
    did not; a broken plugin never stops the others, and naming it gives its error."""
    global _discovered
    if _discovered and not again:
        return dict(_NOT_LOADED)
    _discovered = True
    _NOT_LOADED.clear()
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            entry = ep.load()
            if not isinstance(entry, BenchmarkEntry):
                raise TypeError(f"it names a {type(entry).__name__}, not a BenchmarkEntry")
            if entry.name != ep.name:
                raise ValueError(f"its entry is named {entry.name!r}")
            if _ENTRIES.get(ep.name, entry) is not entry:
                raise ValueError("the name is already registered")
            problem = entry.problem()
            if problem:
                raise ValueError(problem)
            _ENTRIES[ep.name] = entry
        except Exception as e:  # a plugin's import or entry failed: kept, said when the name is used
            _NOT_LOADED[ep.name] = f"entry point {ep.name} = {ep.value} ({ENTRY_POINT_GROUP}): {e}"
    return dict(_NOT_LOADED)


def benchmark_names() -> tuple[str, ...]:
    """Every registered name: the built-ins first, then in registration order (entry points included)."""
    discover_benchmarks()
    return tuple(_ENTRIES)


def unknown_benchmark(name: str) -> str | None:
    """Why `name` is no registered benchmark (with the names to choose from), or None. A name already
    registered is looked up without reading the entry points (the built-ins' classes read their entries while
    they load, before any plugin that imports them could)."""
    if name in _ENTRIES:
        return None
    names = benchmark_names()
    if name in names:
        return None
    if name in _NOT_LOADED:
        return f"benchmark {name!r} did not load: {_NOT_LOADED[name]}"
    return (
        f"unknown benchmark {name!r}; choose one of {', '.join(names)} (a lab's own benchmark: "
        f"register_benchmark, or an entry point in the group {ENTRY_POINT_GROUP}; docs/benchmarks.md)"
    )


def lift_legacy_options(data: dict[str, Any], benchmark: str) -> dict[str, Any]:
    """A config mapping of `benchmark` with a LEGACY_OPTIONS key at its top level, that key read under
    `benchmark_options:`. Its saved value on a benchmark without that option is dropped (every saved config
    carries it); another is a ValueError naming the field, the benchmarks that have it and the fix."""
    given = {k: data[k] for k in LEGACY_OPTIONS if k in data}
    if not given:
        return data
    data = {k: v for k, v in data.items() if k not in given}
    options = dict(data.get("benchmark_options") or {})
    has = benchmark_entry(benchmark).option_names() if unknown_benchmark(benchmark) is None else ()
    for key, value in given.items():
        if key not in has and value == LEGACY_OPTIONS[key]:
            continue
        if key not in has and not unknown_benchmark(benchmark):
            having = ", ".join(n for n in benchmark_names() if key in benchmark_entry(n).option_names())
            raise ValueError(
                f"{key} {value!r}: an option of {having} (benchmark_options.{key}); benchmark {benchmark} has no "
                f"option {key}: remove {key}"
            )
        if key in options and options[key] != value:
            raise ValueError(f"{key} {value!r} and benchmark_options.{key} {options[key]!r}: set it in one place")
        options[key] = value
    return {**data, "benchmark_options": options}


def benchmark_entry(name: str) -> BenchmarkEntry:
    """The registered entry of `name` (its `options` are what the config lets a run set); ValueError if none."""
    problem = unknown_benchmark(name)
    if problem:
        raise ValueError(problem)
    return _ENTRIES[name]


register_benchmark(
    "bfcl_multi_turn",
    "rods_core.benchmarks.bfcl.benchmark:BfclMultiTurn",
    task_type="rods_core.benchmarks.bfcl.tasks:Task",
    options={"hints", "demo_seeds", "categories", "sft_variants"},
    description="BFCL v3 multi-turn (seeds.categories and eval.categories choose among its categories)",
)
for _backend in ("kv", "rec_sum"):
    register_benchmark(
        f"bfcl_memory_{_backend}",
        f"rods_core.benchmarks.memory.benchmark:{_backend}_memory",
        task_type="rods_core.benchmarks.memory.tasks:MemoryTask",
        description=f"BFCL v4 memory with the {_backend} memory backend",
        options_model="rods_core.benchmarks.memory.options:MemoryOptions",
    )
