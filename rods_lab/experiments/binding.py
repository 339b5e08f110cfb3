"""Did each ablation of rods change anything? An arm that could not differ from rods (its rule is rods' rule at
these settings, or its limit never bound) is a no-op: the report says so instead of reporting a difference.

Three kinds of evidence, per ablation arm: its run config equals rods' (apart from the name); its rule at rods'
settings (single_layer vs layered retirement with streaks of 1 and no staleness within the run; P_max vs the
variants ever alive, and the `offer/budget` events); and whether its runs are step-for-step identical to rods' on
every run seed (runs repeat exactly with synthesis.deterministic, so identical runs mean the flag changed nothing).
Pure functions over the report's frames and each arm's run config (a dict as config.yaml holds it).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from rods_core.reasons import OfferReason, RetireReason

# the per-step figures compared between an arm's run and rods' run of the same seed
SAME_COLUMNS = ("reward", "informative_share", "pool_active", "pool_staged", "pool_retired", "trajectories")
RETIRE_BY_STREAK = tuple(
    str(r)
    for r in (
        RetireReason.RETIRE_MASTERED,
        RetireReason.RETIRE_HARD,
        RetireReason.PROBE_MASTERED,
        RetireReason.PROBE_HARD,
    )
)


@dataclass(frozen=True)
class Binding:
    """Whether an ablation arm changed its runs (None: not decided) and the evidence, in words."""

    arm: str
    binds: bool | None
    evidence: str


def _count(buffer: pd.DataFrame, arm: str, reasons: tuple[str, ...]) -> int:
    if buffer.empty:
        return 0
    return int(((buffer.method == arm) & buffer.reason.isin(reasons)).sum())


def _without_name(cfg: dict) -> dict:
    return {k: v for k, v in cfg.items() if k not in ("name", "output_dir", "workspace")}


def identical_to_rods(steps: pd.DataFrame, arm: str) -> bool | None:
    """Whether every run of `arm` has the same per-step figures as rods' run of its seed (None: no seed shared)."""
    cols = [c for c in SAME_COLUMNS if c in steps]
    shared = sorted(set(steps[steps.method == arm].seed) & set(steps[steps.method == "rods"].seed))
    if not shared:
        return None
    for seed in shared:
        a, r = (steps[(steps.method == m) & (steps.seed == seed)].sort_values("step") for m in (arm, "rods"))
        if len(a) != len(r) or not a[cols].reset_index(drop=True).equals(r[cols].reset_index(drop=True)):
            return False
    return True


def _rule(arm: str, rods: dict, buffer: pd.DataFrame, steps: pd.DataFrame, max_steps: int) -> Binding | None:
    """The arm's own rule at rods' settings; None when the rule gives no verdict."""
    b = rods.get("buffer", {})
    if arm == "single_layer":
        same = b.get("mastered_streak", 2) == 1 and b.get("hard_streak", 3) == 1
        if same and b.get("stale_steps", 100) >= max_steps:
            return Binding(arm, False, f"streaks of 1 and stale_steps {b.get('stale_steps', 100)} >= {max_steps} steps: "
                           "rods' layered retirement is the single rule")  # fmt: skip
    if arm == "no_budget":
        p_max, hits = b.get("p_max", 50), _count(buffer, "rods", (str(OfferReason.BUDGET),))
        mine = steps[steps.method == arm]
        alive = int((mine.pool_active + mine.pool_staged).max()) if not mine.empty else None
        if hits == 0 and alive is not None and alive <= p_max:
            return Binding(arm, False, f"P_max {p_max} never bound: no offer/budget event in rods' runs, at most "
                           f"{alive} tasks alive in active + staged in no_budget's")  # fmt: skip
        return Binding(arm, True, f"{hits} offer/budget refusals in rods' runs; up to {alive} alive without P_max")
    if arm == "direct_injection":
        n = _count(buffer, arm, (str(OfferReason.DIRECT),))
        return Binding(arm, n > 0, f"{n} variants injected directly")
    if arm == "paper_streaks":
        n = _count(buffer, "rods", RETIRE_BY_STREAK)
        return Binding(arm, n > 0, f"{n} retirements in rods' runs that longer streaks would defer")
    return None


def binding_checks(
    configs: dict[str, dict], buffer: pd.DataFrame, steps: pd.DataFrame, landing: pd.DataFrame, max_steps: int
) -> list[Binding]:
    """One Binding per arm other than rods whose config differs from rods' only in buffer settings (an ablation):
    `configs` maps arm -> its first run's config; `buffer`, `steps`, `landing` are the report's frames."""
    rods = configs.get("rods")
    if rods is None:
        return []
    out = []
    for arm, cfg in configs.items():
        if arm == "rods" or cfg.get("method") != "rods":
            continue
        if _without_name(cfg) == _without_name(rods):
            out.append(Binding(arm, False, "its run config equals rods'"))
            continue
        same = identical_to_rods(steps, arm)
        if same:
            out.append(Binding(arm, False, "identical to rods at every step of every run seed"))
            continue
        verdict = _rule(arm, rods, buffer, steps, max_steps)
        if verdict is None:
            made = int((landing.method == arm).sum()) if not landing.empty else 0
            verdict = Binding(
                arm, None if same is None else True, f"{made} variants synthesized; runs differ from rods'"
            )
        out.append(verdict)
    return out
