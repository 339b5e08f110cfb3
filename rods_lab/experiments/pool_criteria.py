"""The pool-replicates design's primary outcome and confirmatory tests (docs/experiments/pool-replicates/design.md),
as pure functions over per-replicate figures.

Primary outcome, per run: the H1 progress area, the mean over the evaluations after step 0 of (progress there minus
progress at step 0). P1 rods > static and P2 rods > uniform_parents: supported when the Holm-adjusted one-sided p is
below alpha and the 95% interval's low end is above 0; refuted when its high end is below +REFUTE_BELOW. P3 rods not
worse than offline_large by more than NONINFERIORITY: supported when the 95% interval's low end of rods -
offline_large is above -NONINFERIORITY, refuted when its high end is below it; its p (of the shifted differences
d + NONINFERIORITY, one-sided) only joins the Holm family. Otherwise inconclusive. Every test is paired by
replicate (rods_core.statistics.paired_t, one-sided "greater": exact sign-flip p below its SMALL_K pairs); Holm runs
over P1-P3 alone. At INTERIM_K replicates (replicates 0 to INTERIM_K - 1) the design stops early only if every one
of P1-P3 is supported at raw one-sided p <= INTERIM_P, and gives no verdict when it goes on; at PLANNED_K the final
analysis uses Holm at family-wise FINAL_ALPHA. Any other count is descriptive: figures, no verdict.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from rods_core.statistics import holm, paired_t
from rods_lab.experiments.audit import THRESHOLD, below

PLANNED_K = 16
INTERIM_K = 8
INTERIM_P = 0.0005  # O'Brien-Fleming spending at half the information, per test (3 x 0.0005 spent)
FINAL_ALPHA = 0.0485  # family-wise one-sided alpha of the final look, less the interim's spend
REFUTE_BELOW = 0.02  # P1, P2 refuted: a gain of this much or more excluded (the interval's high end below it)
NONINFERIORITY = 0.03  # P3's margin
TESTS = {  # name -> (arm, reference, kind)
    "P1": ("rods", "static", "superiority"),
    "P2": ("rods", "uniform_parents", "superiority"),
    "P3": ("rods", "offline_large", "noninferiority"),
}
ARMS = ("static", "rods", "uniform_parents", "offline_small", "offline_large")  # a replicate is complete with all
CLAIMS = {
    "P1": "rods > static on H1 progress area",
    "P2": "rods > uniform_parents on H1 progress area (boundary parents matter, not only more tasks)",
    "P3": f"rods not worse than offline_large by more than {NONINFERIORITY} on H1 progress area",
}


def progress_area(evals: dict[int, float]) -> float:
    """The mean over the evaluations after step 0 of (progress there - progress at step 0); nan without a step-0
    evaluation or any after it. `evals` maps step -> H1 progress."""
    if 0 not in evals:
        return math.nan
    later = [p - evals[0] for step, p in evals.items() if step > 0]
    return sum(later) / len(later) if later else math.nan


@dataclass(frozen=True)
class Test:
    """One confirmatory test at one look."""

    name: str
    claim: str
    n: int  # replicates paired
    diff: float  # mean of rods - reference over the paired replicates
    lo: float  # the two-sided 95% paired t-interval
    hi: float
    p: float  # one-sided ("greater"), of d (P1, P2) or of d + NONINFERIORITY (P3)
    p_holm: float
    verdict: str  # supported, refuted, inconclusive, not evaluable; at an interim that goes on or a partial look, none
    detail: str

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Look:
    """The tests at one look and what the design does next."""

    look: str  # interim (K = INTERIM_K), final (K >= PLANNED_K), or partial (any other K: not a planned look)
    k: int  # replicates with every arm's area
    alpha: float  # FINAL_ALPHA (Holm p) at the final look, INTERIM_P (raw p) at the interim
    tests: list[Test]
    decision: str

    def as_dict(self) -> dict:
        return {**asdict(self), "tests": [t.as_dict() for t in self.tests]}


def paired_differences(areas: dict[str, dict], arm: str, ref: str) -> list[float]:
    """arm - ref per replicate that has both areas, finite, in replicate order."""
    a, b = areas.get(arm, {}), areas.get(ref, {})
    shared = sorted(k for k in set(a) & set(b) if math.isfinite(a[k]) and math.isfinite(b[k]))
    return [a[k] - b[k] for k in shared]


LOOKS = ("interim", "final")
NO_VERDICT = {"interim": "none at the interim", "partial": "none (descriptive)"}


def look_of(k: int) -> str:
    return "final" if k >= PLANNED_K else "interim" if k == INTERIM_K else "partial"


def planned_look(replicates: set[int], named: str | None = None) -> tuple[str, list[int], str]:
    """(the look, the replicates it reads, why a named look is not made) for these complete replicates (design.md,
    Amendment 10): the interim reads replicates 0 to INTERIM_K - 1 and the final 0 to PLANNED_K - 1, each once every
    one of them is complete, however many others have run. Unnamed, the interim is made when exactly its
    replicates are complete. Any other set, a named look among them, is partial: every complete replicate, no
    verdict."""
    if named not in (None, *LOOKS):
        raise ValueError(f"look {named!r}: give one of {', '.join(LOOKS)} (or none: the replicate count decides)")
    upto = {"interim": INTERIM_K, "final": PLANNED_K}
    if named is None:
        if set(range(PLANNED_K)) <= replicates:
            named = "final"
        elif replicates == set(range(INTERIM_K)):
            named = "interim"
        else:
            return "partial", sorted(replicates), ""
    missing = sorted(set(range(upto[named])) - replicates)
    if missing:
        why = f"the {named} look reads replicates 0-{upto[named] - 1}, and {missing} are not complete"
        return "partial", sorted(replicates), why
    return named, list(range(upto[named])), ""


def evaluate(areas: dict[str, dict], look: str | None = None, why: str = "") -> Look:
    """P1-P3 over `areas` (arm -> replicate -> H1 progress area) at the look its replicate count makes (or the one
    named: planned_look's): the verdicts at the final look; at the interim whether the design stops (all three
    supported at raw p <= INTERIM_P: then those are the verdicts) or goes on (no verdict); at any other count, or
    at a partial look (`why` it is one), figures alone."""
    if look not in (None, *LOOKS, "partial"):
        raise ValueError(f"look {look!r}: give one of {', '.join(LOOKS)} (or none: the replicate count decides)")
    diffs = {name: paired_differences(areas, arm, ref) for name, (arm, ref, _) in TESTS.items()}
    results, ps = {}, {}
    for name, d in diffs.items():
        shift = NONINFERIORITY if TESTS[name][2] == "noninferiority" else 0.0
        r, rp = paired_t(d), paired_t([x + shift for x in d], alternative="greater")
        results[name], ps[name] = r, rp.p
    k = min(len(d) for d in diffs.values())
    look = look or look_of(k)
    adjusted = holm(ps, TESTS)
    if look == "final":
        # P3's support is its interval's alone (design.md); its p only joins Holm's family
        significant = {n: TESTS[n][2] == "noninferiority" or adjusted[n] < FINAL_ALPHA for n in TESTS}
        tests = [_judge(n, results[n], ps[n], adjusted[n], significant[n]) for n in TESTS]
        decision = f"final analysis at K = {k}, Holm over P1-P3 at family-wise alpha {FINAL_ALPHA}"
        return Look(look, k, FINAL_ALPHA, tests, decision)
    tests = [_judge(n, results[n], ps[n], adjusted[n], ps[n] <= INTERIM_P) for n in TESTS]
    if look == "interim" and all(t.verdict == "supported" for t in tests):
        return Look(look, k, INTERIM_P, tests, f"stop: every one of P1-P3 supported at one-sided p <= {INTERIM_P}")
    tests = [replace(t, verdict=NO_VERDICT[look]) if t.verdict != "not evaluable" else t for t in tests]
    if look == "interim":
        decision = (
            f"continue to K = {PLANNED_K} (no futility stop; the interim stops only when all three are supported "
            f"at p <= {INTERIM_P}, and gives no verdict otherwise)"
        )
    else:
        planned = why or f"interim K = {INTERIM_K}, final K = {PLANNED_K}"
        decision = f"K = {k} is not a planned look ({planned}): descriptive only"
    return Look(look, k, INTERIM_P if look == "interim" else FINAL_ALPHA, tests, decision)


def _judge(name: str, r, p: float, p_holm: float, significant: bool) -> Test:
    """The verdict of one test from its paired result (two-sided 95% interval), its one-sided p, Holm's p and
    whether its p passes the look's bound (`significant`)."""
    kind = TESTS[name][2]
    if r.n < 2 or math.isnan(r.lo):
        return Test(name, CLAIMS[name], r.n, r.mean, r.lo, r.hi, p, p_holm, "not evaluable", f"{r.n} replicate(s)")
    span = f"rods - {TESTS[name][1]} {r.mean:+.4f} (95% CI {r.lo:+.4f} .. {r.hi:+.4f}, n {r.n}, {r.method})"
    if kind == "superiority":
        support = significant and r.lo > 0
        refute = r.hi < REFUTE_BELOW
        verdict = "supported" if support else "refuted" if refute else "inconclusive"
        if support and refute:
            span += f"; a gain of {REFUTE_BELOW} or more is excluded too (the gain is real and small)"
    else:
        support = significant and r.lo > -NONINFERIORITY
        verdict = "supported" if support else "refuted" if r.hi < -NONINFERIORITY else "inconclusive"
    return Test(name, CLAIMS[name], r.n, r.mean, r.lo, r.hi, p, p_holm, verdict, span)


def markdown(result: Look) -> list[str]:
    """The look as Markdown lines: a table of P1-P3 and the decision."""
    lines = [f"## P1-P3 ({result.look} look, K = {result.k})", ""]
    lines += ["| test | claim | figures | one-sided p | Holm p | verdict |", "|---|---|---|---|---|---|"]
    for t in result.tests:
        lines.append(f"| {t.name} | {t.claim} | {t.detail} | {_p(t.p)} | {_p(t.p_holm)} | **{t.verdict}** |")
    return [*lines, "", f"Decision: {result.decision}.", ""]


def _p(p: float) -> str:
    return "—" if p is None or math.isnan(p) else f"{p:.3g}"


def areas(summaries: list[dict], split: str = "H1", last_only: bool = False) -> dict[str, dict[int, float]]:
    """arm -> replicate -> progress area on `split` (H1 unless named), from run summaries
    (rods_lab/experiments/summaries.py); with `last_only`, the last evaluation minus step 0. A set is read from its
    greedy evaluations, or from its sampled ones where it has only those (H1_sampled); a run whose set holds no
    task leaves that set out."""
    out: dict[str, dict[int, float]] = {}
    for s in summaries:
        rows = [e for e in s["evaluations"] if e.get("set") == split]
        rows = [e for e in rows if not e.get("sampled")] or rows
        if rows and all(e.get("n") == 0 for e in rows):
            continue  # an empty set (H1b where no parent passed its filter) is read in no figure, never as 0
        evals = {int(e["step"]): float(e["progress"]) for e in rows}
        if last_only and evals:
            evals = {step: evals[step] for step in {0, max(evals)} if step in evals}
        out.setdefault(s["arm"], {})[s["replicate"]] = progress_area(evals)
    return out


def far_task_diffs(summaries: list[dict], threshold: float = THRESHOLD) -> dict[str, list[float]]:
    """Per test of P1-P3: the replicates' differences (arm - reference) in H1 progress area over the H1 tasks whose
    nearest training task is below `threshold` in both runs of the pair (the near-duplicate audit's item
    similarity, each run's own training tasks), read from the greedy evaluations' per-task progress. A replicate
    whose pair shares no such task, or whose runs lack per-task figures, is left out."""
    by = {(s["arm"], s["replicate"]): s for s in summaries}
    out: dict[str, list[float]] = {}
    for name, (arm, ref, _) in TESTS.items():
        diffs = []
        for k in sorted({rep for a, rep in by if a == arm}):
            pair = [by.get((arm, k)), by.get((ref, k))]
            if None in pair or not all((s.get("audit") or {}).get("H1") for s in pair):
                continue
            far = set.intersection(*(below(s["audit"]["H1"], threshold) for s in pair))
            a, b = (_task_area(s["evaluations"], far) for s in pair)
            if far and math.isfinite(a) and math.isfinite(b):
                diffs.append(a - b)
        out[name] = diffs
    return out


def far_task_markdown(summaries: list[dict], threshold: float = THRESHOLD) -> list[str]:
    """The primary outcome on the H1 tasks far from training (far_task_diffs) as Markdown lines: per test the paired
    mean difference and its 95% interval, descriptive (no verdict, outside the Holm family)."""
    lines = [f"## P1-P3 on the H1 tasks below {threshold} similarity to training (descriptive)", ""]
    lines += ["| test | pairs | rods - reference | 95% CI |", "|---|---|---|---|"]
    for name, d in far_task_diffs(summaries, threshold).items():
        r = paired_t(d)
        ci = f"{r.lo:+.4f} .. {r.hi:+.4f}" if math.isfinite(r.lo) else "—"
        mean = f"{r.mean:+.4f}" if math.isfinite(r.mean) else "—"
        lines.append(f"| {name}: rods vs {TESTS[name][1]} | {r.n} | {mean} | {ci} |")
    return [*lines, ""]


def _task_area(evaluations: list[dict], tasks: set[str]) -> float:
    """progress_area of the mean per-task H1 progress over `tasks` at each greedy evaluation that scored them all."""
    evals = {}
    for e in evaluations:
        per = e.get("per_task") or {}
        if e.get("set") == "H1" and not e.get("sampled") and tasks and tasks <= per.keys():
            evals[int(e["step"])] = sum(per[t] for t in tasks) / len(tasks)
    return progress_area(evals)


def read_summaries(*folders: Path) -> list[dict]:
    """Every run summary (<run id>.json) of each folder, folder by folder in the order given (the order in which a
    replicate's blocks take precedence: `complete`), each folder in name order. A folder that is not there is an
    error (a mistyped second folder would otherwise leave its blocks out unseen). Each summary gains
    `summaries_folder`, its folder's name, which names its platform (`platform`)."""
    missing = [str(f) for f in folders if not Path(f).is_dir()]
    if missing:
        raise ValueError(f"{', '.join(missing)}: no run summaries there (no such folder)")
    return [
        {**json.loads(p.read_text()), "summaries_folder": Path(folder).name}
        for folder in folders
        for p in sorted(Path(folder).glob("*.json"))
    ]


def block_of(summary: dict) -> tuple:
    """The block a run belongs to (design.md, Amendment 8): its replicate, the CPU kernel set it ran on and the
    warm-started model it began from. Only runs of one block are paired."""
    return summary["replicate"], summary.get("cpu_kernels"), summary.get("model_sha256")


def platform(summary: dict) -> str:
    """What a run ran on, for people: its CPU kernel set and the folder its summary was read from (design.md,
    Amendment 12: a folder holds one kernel set and one model; two machines with one kernel set can build two models,
    so the kernel set alone does not tell their blocks apart)."""
    folder = summary.get("summaries_folder")
    return f"{summary.get('cpu_kernels')} ({folder}/)" if folder else str(summary.get("cpu_kernels"))


def complete(summaries: list[dict], arms: tuple[str, ...] = ARMS) -> tuple[list[dict], list[int]]:
    """(the summaries of each replicate's complete block, the replicates with none, left out as incomplete). A block
    is complete when it holds every arm; where a replicate has two, the one read first counts (`read_summaries`'
    folder order). Two summaries of one arm in one block are an error, never one silently read for the other."""
    have: dict[tuple, set[str]] = {}
    seen: dict[tuple, str] = {}
    for s in summaries:
        key = (s["arm"], *block_of(s))
        if key in seen:
            raise ValueError(
                f"two summaries of {s['arm']} in replicate {s['replicate']}: {seen[key]} and {s.get('run')}"
            )
        seen[key] = s.get("run", "?")
        have.setdefault(block_of(s), set()).add(s["arm"])
    counted: dict[int, tuple] = {}
    for block, held in have.items():  # in the order read
        if set(arms) <= held:
            counted.setdefault(block[0], block)
    kept = [s for s in summaries if counted.get(s["replicate"]) == block_of(s)]
    return kept, sorted({block[0] for block in have} - set(counted))


def set_aside(summaries: list[dict], arms: tuple[str, ...] = ARMS) -> list[str]:
    """The blocks that count in no test, each as "replicate k on <platform>: <arms>", incomplete or (complete) not
    the one read first."""
    kept = {block_of(s) for s in complete(summaries, arms)[0]}
    held: dict[tuple, list[str]] = {}
    where: dict[tuple, str] = {}
    for s in summaries:
        if block_of(s) not in kept:
            held.setdefault(block_of(s), []).append(s["arm"])
            where.setdefault(block_of(s), platform(s))
    return [
        f"replicate {b[0]} on {where[b]}: {', '.join(a for a in arms if a in got)}"
        + (" (complete; another block of it counts)" if set(arms) <= set(got) else " (incomplete)")
        for b, got in sorted(held.items(), key=lambda item: item[0][0])  # by replicate, then in the order read
    ]


def judged(summaries: list[dict], look: str | None = None) -> tuple[Look, list[dict]]:
    """P1-P3 over each replicate's complete block (design.md, Amendments 4 and 8) at the look those replicates make
    or the one named (planned_look), and the summaries that look reads: at the interim replicates 0 to
    INTERIM_K - 1 alone, however many have run since."""
    kept = complete(summaries)[0]
    look, reads, why = planned_look({s["replicate"] for s in kept}, look)
    kept = [s for s in kept if s["replicate"] in reads]
    return evaluate(areas(kept), look, why), kept


def from_summaries(folders: Path | list[Path], look: str | None = None) -> tuple[Look, list[dict]]:
    """judged() over the runs summarised in `folders` (rods_lab/experiments/summaries.py; one folder a kernel set,
    the first counting first)."""
    folders = [folders] if isinstance(folders, (str, Path)) else list(folders)
    found = read_summaries(*folders)
    if not found:
        raise ValueError(f"{', '.join(map(str, folders))}: no run summaries (<run id>.json) to read")
    return judged(found, look)


DEPLETION_FALL = 0.15  # the pilot's fall of static's informative share that fixes the run length
WINDOW = 10  # steps of the rolling mean (and of the first mean it is measured from)
LENGTH_BOUNDS = (60, 200)


def run_length(shares: list[list[float]]) -> tuple[int, int | None]:
    """(L, the depletion step or None) from the pilot's static runs (each a list of per-step informative shares,
    step 1 first): the first step at which the WINDOW-step rolling mean, averaged over the runs, has fallen by at
    least DEPLETION_FALL below its first WINDOW steps' mean, times 1.5, rounded up to a multiple of 10 and bounded
    to LENGTH_BOUNDS; the upper bound and None when it never falls that far."""
    n = min(len(s) for s in shares)
    mean = [sum(s[i] for s in shares) / len(shares) for i in range(n)]
    first = sum(mean[:WINDOW]) / WINDOW
    for end in range(WINDOW, n + 1):
        if sum(mean[end - WINDOW : end]) / WINDOW <= first - DEPLETION_FALL + 1e-12:
            lo, hi = LENGTH_BOUNDS
            return min(hi, max(lo, math.ceil(1.5 * end / 10) * 10)), end
    return LENGTH_BOUNDS[1], None


def length_from_summaries(folder: Path, arm: str = "static") -> dict:
    """The run length L from the pilot's run summaries: `arm`'s per-step informative shares (run_length)."""
    runs = [s for s in read_summaries(folder) if s["arm"] == arm]
    shares = [s["steps"]["per_step"].get("boundary/informative_share") or [] for s in runs]
    shares = [[0.0 if v is None else v for v in s] for s in shares if s]
    if not shares:
        raise ValueError(f"{folder}: no {arm} run summary with per-step informative shares")
    length, step = run_length(shares)
    every = [s["run"] for s in read_summaries(folder)]
    return {"L": length, "depletion_step": step, "runs": [s["run"] for s in runs], "reached": step is not None,
            "runs_all": every}  # fmt: skip
