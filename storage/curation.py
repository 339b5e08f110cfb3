"""Curation at volume, as plain data: the review table (one row per staged or decided variant), its views,
the batches a reviewer sends, and the audit trail of decisions exported as JSONL or CSV.

No Streamlit and no reading here: callers pass the pools snapshot, the run's event-derived facts and the
control database's decisions, so the same rules serve the Review page, `rods runs audit` and the tests.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping, Sequence

import pandas as pd

from rods_core.benchmarks.protocols import Benchmark, TaskRecord
from rods_core.benchmarks.registry import make_benchmark
from rods_core.reasons import OfferReason
from rods_core.spreadsheet import csv_text
from storage.control import ControlDB, DecisionRecord
from storage.pools import PoolsSnapshot

VIEWS = ("awaiting_review", "probing", "decided", "all")
REVIEW_COLUMNS = [
    "task_id",
    "state",
    "decision",
    "parent_id",
    "category",
    "class_combo",
    "parent_region",
    "parent_mean",
    "values_changed",
    "calls_changed",
    "turns_changed",
    "stages",
    "since_step",
    "age_steps",
    "comments",
]
# the review table of a benchmark whose tasks have no structure (`Benchmark.structure` None): no class
# combination, calls or turns (`protocols.record_distance`)
GROUP_REVIEW_COLUMNS = [c for c in REVIEW_COLUMNS if c not in ("class_combo", "calls_changed", "turns_changed")]
AUDIT_COLUMNS = [
    "id",
    "task_id",
    "action",
    "reviewer",
    "outcome",
    "applied_step",
    "latency_steps",
    "seen_step",
    "reason",
    "comment",
    "batch_id",
    "created_at",
]
BULK_ACTIONS = {  # what a reviewer's action sends -> (the decision's action, its payload); labels are the UI's
    "approve": ("approve", None),
    "reject": ("reject", None),
    "reseed_promote": ("reseed", {"mode": "promote"}),
    "reseed_synthesize": ("reseed", {"mode": "synthesize"}),
}


Line = tuple[str, bool]  # (text, changed)


def _turn_lines(t: TaskRecord | None, i: int) -> list[str]:
    return [f"user: {t.user_texts[i]}", *t.ground_truth[i]] if t is not None and i < t.n_turns else []


def mark_lines(old: list[str], new: list[str]) -> tuple[list[Line], list[Line]]:
    """Both sides' lines, each marked changed when the other side has no equal line at that place
    (difflib's alignment)."""
    same_old, same_new = set(), set()
    for a, b, n in difflib.SequenceMatcher(None, old, new, autojunk=False).get_matching_blocks():
        same_old.update(range(a, a + n))
        same_new.update(range(b, b + n))
    return [(x, j not in same_old) for j, x in enumerate(old)], [(x, j not in same_new) for j, x in enumerate(new)]


def side_by_side(parent: TaskRecord | None, task: TaskRecord) -> list[tuple[list[Line], list[Line]]]:
    """Per turn, the parent's lines and the variant's ("user: ..." then one line per call), marked by
    `mark_lines`: tasks of turns and calls (a benchmark with `structure`: `user_texts`, `ground_truth`)."""
    return [
        mark_lines(_turn_lines(parent, i), _turn_lines(task, i))
        for i in range(max(task.n_turns, parent.n_turns if parent else 0))
    ]


# ----- the review table --------------------------------------------------------------------------------
def _stages_text(stages: Sequence[Mapping]) -> str:
    return " ".join(f"{s.get('stage', '?')}{'✓' if s.get('accepted') else '✗'}" for s in stages)


def _decision_text(d: DecisionRecord) -> str:
    return f"{d.action}: {d.status}" + (f" @ {d.applied_step}" if d.applied_step is not None else "")


def review_rows(
    snap: PoolsSnapshot,
    reasons: Mapping[str, tuple[str, int]],
    outcomes: Mapping[str, tuple[list[dict], str]],
    stats: pd.DataFrame,
    decisions: Iterable[DecisionRecord],
    comments: Mapping[str, int] | None = None,
    bench: Benchmark | None = None,
) -> pd.DataFrame:
    """One row per staged task and per variant with a decision (wherever it is now), oldest first.

    `reasons` maps a task to its latest buffer (reason, step); `outcomes` a variant to its (stages, reason);
    `stats` holds each task's latest task_stats row (task_id, mean, region, step); `comments` counts notes.
    `bench` (the run's benchmark; BFCL multi-turn when not given) gives each task's category and class
    combination (`Benchmark.facts`) and its distance from its parent (`Benchmark.distance`)."""
    bench = bench or make_benchmark("bfcl_multi_turn")
    last = {d.task_id: d for d in decisions}  # decisions come oldest first: the latest per task wins
    pool_of = snap.pool_of()
    by_id = {t.id: t for t in snap.tasks("all")}
    stat = stats.set_index("task_id")[["mean", "region"]].to_dict("index") if not stats.empty else {}
    now = snap.step or 0
    shown = [t for t in by_id.values() if pool_of[t.id] == "staged" or (t.id in last and t.provenance.parent_id)]
    rows = []
    for t in shown:
        parent_id = t.provenance.parent_id or ""
        reason, since = reasons.get(t.id, ("", None))
        pool = pool_of[t.id]
        state = (
            ("awaiting_review" if reason == OfferReason.AWAITING_REVIEW else "probing") if pool == "staged" else pool
        )
        d, facts = bench.distance(by_id.get(parent_id), t), bench.facts(t)
        ps = stat.get(parent_id, {})
        rows.append(
            {
                "task_id": t.id,
                "state": state,
                "decision": _decision_text(last[t.id]) if t.id in last else "",
                "parent_id": parent_id,
                "category": facts.group,
                "class_combo": facts.class_combo,
                "parent_region": ps.get("region") or "",
                "parent_mean": ps.get("mean"),
                "values_changed": d.values,
                "calls_changed": d.calls,
                "turns_changed": d.turns,
                "stages": _stages_text(outcomes.get(t.id, ([], ""))[0]),
                "since_step": since,
                "age_steps": None if since is None else max(0, now - since),
                "comments": (comments or {}).get(t.id, 0),
            }
        )
    return pd.DataFrame(rows, columns=REVIEW_COLUMNS).astype({"parent_mean": "float64"})


def default_view(mode: str, rows: pd.DataFrame) -> str:
    """What a run's Review opens on: a gated run's waiting variants; an auto run's probing ones (all, when
    none is probing), since nothing there waits for approval."""
    if mode == "gated":
        return "awaiting_review"
    return "probing" if (rows.state == "probing").any() else "all"


def filter_rows(
    rows: pd.DataFrame,
    view: str = "all",
    text: str = "",
    categories: Sequence[str] = (),
    combos: Sequence[str] = (),
    regions: Sequence[str] = (),
) -> pd.DataFrame:
    """The rows of a view ("decided": any decision recorded) matching every filter given."""
    if view not in VIEWS:
        raise ValueError(f"view must be one of {VIEWS}, got {view!r}")
    keep = pd.Series(True, index=rows.index)
    if view == "decided":
        keep &= rows.decision != ""
    elif view != "all":
        keep &= rows.state == view
    if text.strip():
        needle = text.strip().lower()
        keep &= rows.task_id.str.lower().str.contains(needle, regex=False) | rows.parent_id.str.lower().str.contains(
            needle, regex=False
        )
    for col, chosen in (("category", categories), ("class_combo", combos), ("parent_region", regions)):
        if chosen:
            keep &= rows[col].isin(list(chosen))
    return rows[keep]


def page_of(rows: pd.DataFrame, sort: str, descending: bool, page: int, size: int) -> pd.DataFrame:
    """One page (1-based) of the rows sorted by a column (task id breaks ties, so the order is stable)."""
    if sort not in rows.columns:
        raise ValueError(f"sort must be a column of the review table, got {sort!r}")
    ordered = rows.sort_values([sort, "task_id"], ascending=[not descending, True], na_position="last", kind="stable")
    start = (max(1, page) - 1) * size
    return ordered.iloc[start : start + size]


def batch_items(rows: pd.DataFrame, bulk: str) -> tuple[list[tuple[str, str, dict | None]], list[str]]:
    """(the decisions the bulk action `bulk` (a key of BULK_ACTIONS) sends for these rows, the task ids it
    skips): approve only what awaits review; reject only what is staged or active (not retired). The trainer
    would refuse those; the app does not send them."""
    action, payload = BULK_ACTIONS[bulk]
    allowed = {"approve": ["awaiting_review"], "reject": ["awaiting_review", "probing", "active"]}.get(action)
    ok = rows.state.isin(allowed) if allowed else pd.Series(True, index=rows.index)
    sent = [(tid, action, payload) for tid in rows.task_id[ok]]
    return sent, rows.task_id[~ok].tolist()


def send_batch(
    db: ControlDB,
    run_id: str,
    items: list[tuple[str, str, dict | None]],
    reviewer: str,
    comment: str = "",
    seen_step: int | None = None,
    signed: str | None = None,
) -> list[DecisionRecord]:
    """One action of the reviewer: its decisions in one transaction under one batch id, stamped with the
    run's last finished step (from its event log; the heartbeat's step lags by design), so the audit shows
    how many steps each decision took to apply. `signed`: the reviewer as the audit chain records them."""
    if not reviewer.strip():
        raise ValueError("a decision needs a reviewer name: fill in the Reviewer field")
    return db.add_decisions(run_id, items, reviewer.strip(), comment.strip() or None, seen_step, signed)


# ----- the audit trail ---------------------------------------------------------------------------------
def audit_frame(decisions: Iterable[DecisionRecord]) -> pd.DataFrame:
    """Who decided what and when, its outcome (pending, claimed, applied, refused) with the reason, the
    step it took effect, and how many steps after the step its reviewer saw."""
    rows = []
    for d in decisions:
        payload = d.payload_dict()
        action = d.action + (" (fix & accept)" if payload.get("accept") else "")
        action += f" ({payload['mode']})" if d.action == "reseed" and payload.get("mode") else ""
        seen = d.seen_step
        rows.append(
            {
                "id": d.id,
                "batch_id": d.batch_id or "",
                "task_id": d.task_id,
                "action": action,
                "reviewer": d.author,
                "created_at": d.created_at.isoformat() if d.created_at else "",
                "seen_step": seen,
                "comment": d.comment or "",
                "outcome": d.status,
                "reason": d.reason or "",
                "applied_step": d.applied_step,
                "latency_steps": d.applied_step - seen if d.applied_step is not None and seen is not None else None,
            }
        )
    return pd.DataFrame(rows, columns=AUDIT_COLUMNS).astype(
        {"seen_step": "Int64", "applied_step": "Int64", "latency_steps": "Int64"}
    )


def filter_audit(audit: pd.DataFrame, reviewers: Sequence[str] = (), outcomes: Sequence[str] = (), text: str = ""):
    """Rows by reviewer, outcome, and a substring of the task id, batch id, comment or reason."""
    keep = pd.Series(True, index=audit.index)
    if reviewers:
        keep &= audit.reviewer.isin(list(reviewers))
    if outcomes:
        keep &= audit.outcome.isin(list(outcomes))
    if text.strip():
        needle = text.strip().lower()
        hay = audit.task_id + " " + audit.batch_id + " " + audit.comment + " " + audit.reason
        keep &= hay.str.lower().str.contains(needle, regex=False)
    return audit[keep]


AUDIT_FORMATS = ("jsonl", "csv")


def audit_bytes(audit: pd.DataFrame, fmt: str) -> bytes:
    """The audit rows as JSONL (one decision a line, exact, nulls as null) or CSV (a header row, nulls empty,
    text a spreadsheet would run as a formula neutralized: rods_core.spreadsheet)."""
    if fmt not in AUDIT_FORMATS:
        raise ValueError(f"format must be one of {AUDIT_FORMATS}, got {fmt!r}")
    records = [{k: (None if pd.isna(v) else v) for k, v in r.items()} for r in audit.to_dict("records")]
    if fmt == "jsonl":
        return "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in records).encode()
    return csv_text(records, AUDIT_COLUMNS).encode()
