"""The app's views of a run, as plain data: run table, the model build before the first step, structure
of pool tasks, success by complexity, the review queue, edits, diffs, lineage and task histories. No
Streamlit here; pages lay these out.

Review status is not in pools.json (which lists staged tasks only): a staged variant awaits review when
its latest buffer event is `offer/awaiting_review` (gated runs); any later event (approve, probe) means
it is being probed.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from rods_core.benchmarks import edits
from rods_core.benchmarks.protocols import Benchmark, TaskRecord
from rods_core.benchmarks.registry import DEFAULT_BENCHMARK, make_benchmark
from rods_core.config import SYNTH_METHODS, ConfigError, read_config_data
from rods_core.config.benchmark_entries import lift_legacy_options
from rods_lab.status import RunState, dead_run_message, format_eta, run_state, run_status
from storage.build_progress import BuildProgress, BuildProgressError, read_build_progress
from storage.pools import PoolsFileError, PoolsSnapshot, read_pools_snapshot
from storage.reader import RunReader
from storage.schema import POOLS


# ----- runs --------------------------------------------------------------------------------------------
def runs_table(db) -> pd.DataFrame:
    """One row per run in the control DB, newest first, with the status the UI should show (derived:
    reading the table writes nothing; a run that died before registering shows its log's tail)."""
    rows = []
    for r in db.list_runs():
        cfg = r.config_dict()
        status = run_status(db, r)
        message = r.message or (dead_run_message(r) if (r.status, status) == ("queued", "failed") else "")
        rows.append(
            {
                "id": r.id,
                "name": r.name,
                "method": r.method,
                "status": status,
                "step": r.step or 0,
                "max_steps": int(cfg.get("grpo", {}).get("max_steps") or 0),
                "out_dir": r.out_dir,
                "created_at": r.created_at,
                "message": message,
            }
        )
    return pd.DataFrame(
        rows, columns=["id", "name", "method", "status", "step", "max_steps", "out_dir", "created_at", "message"]
    )


def default_run(table: pd.DataFrame, remembered: str | None = None, synthesizing: bool = True) -> str:
    """The run a picker opens on (`table`: `runs_table`, newest first, not empty): the one the user chose last
    (`remembered`) while it exists; else, for the pages that show synthesized variants (Boundary, Review,
    Buffer), the newest run whose method synthesizes, so a pair launched together opens on the run with
    variants and not on its static twin; else the newest run."""
    if remembered in set(table.id):
        return str(remembered)
    synth = table[table.method.isin(SYNTH_METHODS)] if synthesizing else table.iloc[0:0]
    return str((synth if not synth.empty else table).id.iloc[0])


# ----- the model build, before a run's first step ----------------------------------------------------------
@dataclass(frozen=True)
class BuildView:
    """What a run's card shows while it builds its model, in place of its step progress."""

    fraction: float
    text: str


def describe_build(p: BuildProgress) -> str:
    """One line for a build snapshot, e.g. "building the model: SFT epoch 3 / 52 · loss 0.412 · ETA 12m00s"."""
    eta = f" · {format_eta(p.eta_s)}" if p.eta_s is not None or p.phase == "sft" else ""
    if p.phase == "waiting":
        return f"waiting for the model build of {p.waiting_for or 'another run'}"
    if p.phase == "tokenizer":
        return f"building the model: training the tokenizer{eta}"
    if p.phase == "variants":
        count = f" {p.done} / {p.total}" if p.done is not None and p.total is not None else ""
        return f"building the model: synthesizing warm-start variants{count}{eta}"
    if p.phase == "sft":
        epoch = f" epoch {p.epoch} / {p.epochs}" if p.epoch is not None and p.epochs is not None else ""
        loss = f" · loss {p.loss:.3f}" if p.loss is not None else ""
        return f"building the model: SFT{epoch}{loss}{eta}"
    if p.phase == "done":
        return "model built: waiting for the first step"
    return "model build failed" + (f": {p.detail}" if p.detail else "")


def run_view(run_dir: str | Path, status: str, has_steps: bool) -> tuple[RunState, BuildView | None]:
    """(the state Home counts the run in, with its icon and word; the build's phase while a live run has no
    step yet or its build failed). The build part is None after the first step, for a run that never wrote
    build.json (its model already existed), and for a process that died mid-build (its status and message
    say more than a phase it left behind)."""
    live = not has_steps and status in ("queued", "running", "stale", "failed")
    try:
        p = read_build_progress(run_dir)
    except BuildProgressError as e:
        return run_state(status, None, has_steps), BuildView(0.0, f"model build: {e}") if live else None
    state = run_state(status, p, has_steps)
    if not live or p is None:
        return state, None
    if status == "failed" and p.phase != "failed":
        return state, None
    return state, BuildView(p.fraction, describe_build(p))


def build_view(run_dir: str | Path, status: str, has_steps: bool) -> BuildView | None:
    """The build's phase a run's card shows (`run_view`'s second part)."""
    return run_view(run_dir, status, has_steps)[1]


# ----- the run's benchmark ---------------------------------------------------------------------------------
class RunBenchmarkError(ValueError):
    """A run's config.yaml names no benchmark the app can build; the message says which file and why."""


def run_benchmark(run_dir: str | Path) -> Benchmark:
    """The benchmark a run trains on: `benchmark:` and `benchmark_options:` of its config.yaml (BFCL multi-turn for
    a run folder without one, or written before the fields existed; an older config's top-level option, read as
    its benchmark option)."""
    cfg = Path(run_dir) / "config.yaml"
    try:
        data = read_config_data(cfg) if cfg.is_file() else {}
        name = data.get("benchmark", DEFAULT_BENCHMARK)
        return make_benchmark(name, options=lift_legacy_options(data, name).get("benchmark_options"))
    except (ConfigError, ValueError) as e:
        raise RunBenchmarkError(f"{cfg}: cannot tell the run's benchmark: {e}") from e


def has_structure(bench: Benchmark) -> bool:
    """Whether the benchmark's tasks have a structure the app charts (`Benchmark.structure`): class
    combinations, depth, user turns and ground-truth calls, shown turn by turn. Without one the pages show
    success and pools by group, and a task as the benchmark renders it."""
    return bench.structure is not None


def snapshot(run_dir: str | Path, bench: Benchmark | None = None) -> PoolsSnapshot:
    """The pools snapshot, its tasks read as `bench`'s (the benchmark its config.yaml names when not given),
    or an empty one before the trainer wrote the first."""
    try:
        return read_pools_snapshot(run_dir, bench.task_type if bench else None)
    except PoolsFileError:
        return PoolsSnapshot(step=None, written_at=None, pools={})


# ----- structure and complexity ------------------------------------------------------------------------
STRUCTURE_COLUMNS = [
    "task_id",
    "pool",
    "category",
    "class_combo",
    "depth",
    "turns",
    "calls",
    "complexity",
    "source",
    "parent_id",
]


def _structure_key(task: TaskRecord) -> str:
    """What a signature depends on: the task without its id and provenance (variants of seeds share seeds')."""
    blob = task.model_dump_json(exclude={"id", "provenance"})
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def structure_table(
    snap: PoolsSnapshot, cache_file: str | Path | None = None, bench: Benchmark | None = None
) -> pd.DataFrame:
    """task_id, pool, class_combo, depth, turns, calls, complexity ("depth d × turns t") per pool task, by
    `Benchmark.structure` (`bench`: the run's; BFCL multi-turn when not given).

    BFCL's structure replays each task (~1 ms each); `cache_file` (JSON, e.g. in the workspace) keeps it across
    pages, runs that share seeds, and app restarts. A benchmark whose tasks have no structure: their category,
    class_combo and complexity are the benchmark's group, the rest 0."""
    bench = bench or make_benchmark("bfcl_multi_turn")
    if not has_structure(bench):
        return _group_table(snap, bench)
    cache: dict[str, list] = {}
    if cache_file and Path(cache_file).exists():
        try:
            cache = json.loads(Path(cache_file).read_text(encoding="utf-8"))
        except ValueError:
            cache = {}  # a damaged cache is rebuilt
    rows, new = [], 0
    pool_of = snap.pool_of()
    for t in snap.tasks("all"):
        key = _structure_key(t)
        if key not in cache:
            s = bench.structure(t)
            cache[key], new = [s.class_combo, s.depth, s.turns, s.calls], new + 1
        combo, depth, turns, calls = cache[key]
        rows.append(
            {
                "task_id": t.id,
                "pool": pool_of.get(t.id),
                "category": bench.group_of(t),
                "class_combo": combo,
                "depth": depth,
                "turns": turns,
                "calls": calls,
                "complexity": f"depth {depth} × turns {turns}",
                "source": t.provenance.source,
                "parent_id": t.provenance.parent_id,
            }
        )
    if cache_file and new:
        path = Path(cache_file)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(cache), encoding="utf-8")
        os.replace(tmp, path)
    return pd.DataFrame(rows, columns=STRUCTURE_COLUMNS)


# what a pool table of tasks without structure shows (`pool_table` columns without class combination, depth,
# turns or calls)
GROUP_COLUMNS = ["task_id", "pool", "category", "source", "parent_id", "mean", "var", "region", "last_step"]


def _group_table(snap: PoolsSnapshot, bench: Benchmark) -> pd.DataFrame:
    pool_of = snap.pool_of()
    rows = []
    for t in snap.tasks("all"):
        group = bench.group_of(t)
        rows.append(
            [t.id, pool_of.get(t.id), group, group, 0, 0, 0, group, t.provenance.source, t.provenance.parent_id]
        )
    return pd.DataFrame(rows, columns=STRUCTURE_COLUMNS)


def _values_sql(df: pd.DataFrame, cols: list[str]) -> str:
    def lit(v: Any) -> str:
        return "'" + str(v).replace("'", "''") + "'"

    return ", ".join("(" + ", ".join(lit(r[c]) for c in cols) + ")" for r in df[cols].to_dict("records"))


def success_by_complexity(reader: RunReader, structure: pd.DataFrame, max_points: int = 200) -> pd.DataFrame:
    """Mean progress reward per step, class combination and complexity, aggregated inside DuckDB. Long
    runs are binned into at most `max_points` step buckets (labelled by their first step) so the
    result stays small (a 1M-row log gives ~30k rows, not ~200k)."""
    cols = ["step", "class_combo", "complexity", "depth", "turns", "success", "tasks"]
    if structure.empty:
        return pd.DataFrame(columns=cols)
    values = _values_sql(structure, ["task_id", "class_combo", "complexity", "depth", "turns"])
    return reader.query(f"""
        WITH s(task_id, class_combo, complexity, depth, turns) AS (VALUES {values}),
             w AS (SELECT greatest(1, CAST(ceil(max(step) / {int(max_points)}.0) AS BIGINT)) AS w FROM task_stats)
        SELECT (t.step - 1) // w.w * w.w + 1 AS step, s.class_combo, s.complexity,
               CAST(s.depth AS INT) AS depth, CAST(s.turns AS INT) AS turns,
               sum(t.mean) / count(*) AS success, count(*) AS tasks
        FROM task_stats t JOIN s USING (task_id) CROSS JOIN w GROUP BY ALL ORDER BY ALL""")


def boundary_vs_others(variance_by_region: pd.DataFrame) -> pd.DataFrame:
    """Per step: mean variance of the boundary region, of the other regions, and their ratio."""
    if variance_by_region.empty:
        return pd.DataFrame(columns=["step", "boundary", "others", "ratio"])
    df = variance_by_region.assign(group=lambda d: d.region.where(d.region == "boundary", "others"))
    df = df.assign(w=df.mean_var * df.n).groupby(["step", "group"], as_index=False)[["w", "n"]].sum()
    wide = df.assign(v=df.w / df.n).pivot(index="step", columns="group", values="v").reset_index()
    for c in ("boundary", "others"):
        if c not in wide:
            wide[c] = float("nan")
    wide["ratio"] = wide["boundary"] / wide["others"].where(wide["others"] > 0)
    return wide[["step", "boundary", "others", "ratio"]]


# ----- the review queue --------------------------------------------------------------------------------
def latest_buffer_reasons(reader: RunReader) -> dict[str, tuple[str, int]]:
    df = reader.query(
        "SELECT task_id, arg_max(reason, seq) AS reason, arg_max(step, seq) AS step FROM buffer GROUP BY task_id"
    )
    return {r.task_id: (str(r.reason), int(r.step)) for r in df.itertuples()}


def variant_outcomes(reader: RunReader, variant_ids: list[str]) -> dict[str, tuple[list[dict], str]]:
    if not variant_ids:
        return {}
    df = reader.query(
        "SELECT variant_id, stages, reason FROM variant WHERE variant_id IN (SELECT unnest(?))", [variant_ids]
    )
    return {r.variant_id: (json.loads(r.stages) if r.stages else [], r.reason or "") for r in df.itertuples()}


def edited_task(original: TaskRecord, user_texts: list[str], calls_texts: list[str]) -> TaskRecord:
    """The original (a task of turns and calls: a benchmark with `structure`) with new user turns and ground-truth
    calls (one call per line), read back by its own model; raises ValueError."""
    if len(user_texts) != original.n_turns or len(calls_texts) != original.n_turns:
        raise ValueError(f"the edit must keep the task's {original.n_turns} turns")
    question = [[{"role": "user", "content": u.strip()}] if u.strip() else [] for u in user_texts]
    truth = [[ln.strip() for ln in c.splitlines() if ln.strip()] for c in calls_texts]
    rec = {**original.to_record(), "question": question, "ground_truth": truth}
    return type(original).model_validate(rec)


def verify_edit(bench: Benchmark, original: Any, edited: Any, snap: PoolsSnapshot) -> tuple[bool, str]:
    """The trainer's check (`rods_core.benchmarks.edits.verify_edit`), run first in the app: against the
    task's parent (or itself), and against every other task of the pools for duplicates."""
    by_id = {t.id: t for t in snap.tasks("all")}
    parent = by_id.get(original.provenance.parent_id or "", original)
    keys = {t.content_key() for t in by_id.values()} - {original.content_key()}
    return edits.verify_edit(bench, edited, keys, parent)


# ----- pools, lineage, history -------------------------------------------------------------------------
def pool_table(
    run_dir: str | Path,
    reader: RunReader | None = None,
    cache_file: str | Path | None = None,
    bench: Benchmark | None = None,
) -> pd.DataFrame:
    """Every pool task with its structure (`structure_table`) and latest statistics."""
    reader = reader or RunReader(run_dir)
    table = structure_table(snapshot(run_dir, bench), cache_file, bench)
    stats = reader.latest_task_stats()
    if stats.empty:
        return table.assign(mean=float("nan"), var=float("nan"), region=None, last_step=pd.NA)
    stats = stats[["task_id", "mean", "var", "region", "step"]].rename(columns={"step": "last_step"})
    return table.merge(stats, on="task_id", how="left")


def lineage(table: pd.DataFrame) -> pd.DataFrame:
    """id, parent, label, pool for a treemap: roots hang under one "pool" node; a parent missing from
    the pools (e.g. a seed of another run) becomes a root of its own."""
    if table.empty:
        return pd.DataFrame(columns=["id", "parent", "label", "pool"])
    ids = set(table.task_id)
    rows = [{"id": "pool", "parent": "", "label": "pool", "pool": ""}]
    for r in table.itertuples():
        parent = r.parent_id if r.parent_id in ids else "pool"
        rows.append({"id": r.task_id, "parent": parent, "label": r.task_id, "pool": r.pool})
    missing = {p for p in table.parent_id.dropna() if p not in ids}
    for r in rows:
        if r["id"] in missing:
            r["parent"] = "pool"
    return pd.DataFrame(rows)


def task_history(reader: RunReader, task_id: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(its task_stats rows, its buffer events), oldest first."""
    stats = reader.query(
        "SELECT step, n, mean, var, smoothed_mean, smoothed_var, region FROM task_stats WHERE task_id = ? ORDER BY seq",
        [task_id],
    )
    moves = reader.query("SELECT * FROM buffer WHERE task_id = ? ORDER BY seq", [task_id])
    # a log written without the detail column (its reason holds "code: detail") reads it as missing
    return stats, moves.reindex(columns=["step", "from_pool", "to_pool", "reason", "detail"])


def pools_list() -> tuple[str, ...]:
    return (*POOLS, "all")
