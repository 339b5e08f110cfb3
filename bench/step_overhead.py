"""Step timing of a rods step against a plain TRL GRPO step on the same model, seed and tasks.

The rods arm is `rods train` itself (rods_lab.run.train, the loop with the storage recorder: the RODS step,
synthesis worker, decisions, event log), with a StepWatcher that hands the turn over and records the task ids each step drew. The plain arm
builds the model from the same folder under the same seed and replays those draws through the same
trainer and rollout function with nothing around the step: what TRL's GRPOTrainer does with a
multi-turn rollout_func and nothing else. A step is timed from its start to the end of its row (rods) or
of TRL's log (plain), in wall time and in the arm's process CPU time (all threads, synthesis included).
Whether the arms really drew the same tasks is checked per step, not assumed (`same_draws`).

The arms run in two processes that take turns step by step (rods step k, then plain step k with the
same draws, then rods step k+1, …), so a change in the load of other jobs hits both arms alike instead
of whichever arm ran while it lasted. The overhead is the ratio of the arms' total step time over the paired
steps, its interval a bootstrap over those pairs (`overhead`).
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from transformers import TrainerCallback

from rods_core.config import RunConfig, load_config
from rods_core.policy.tiny import load_policy, read_card
from rods_core.rollout import episode_benchmark
from rods_core.statistics import bootstrap_stat, quantile_interval
from rods_core.threads import apply_thread_policy

WARMUP = 1
PARTS = ("gen_s", "env_s", "reward_s", "render_s", "update_s", "optimizer_s", "hooks_s", "step_s", "cpu_s")


class Turns:
    """Hands the turn over at step boundaries: waits for "go" before a step, reports the step after it."""

    def __init__(self, conn):
        self.conn, self.given = conn, None

    def wait(self) -> None:
        self.given = self.conn.recv()

    def report(self, row: dict, drawn) -> None:
        self.conn.send((row, drawn))


def _policy(cfg: RunConfig):
    model, tokenizer, card_prompt = load_policy(Path(cfg.model.path))
    prompt = card_prompt if read_card(Path(cfg.model.path)) else cfg.episode.prompt
    hints = cfg.episode.hints or cfg.method == "env_augment"
    return model, tokenizer, cfg.episode.model_copy(update={"prompt": prompt, "hints": hints})


def _rods_arm(cfg_data: dict, work: str, conn) -> None:
    """Child process: `rods train`, one step per turn."""
    from rods_core.loop import StepWatcher  # TRL's trainer: the child arms' only, not the parent's
    from rods_lab.run import train

    cfg = RunConfig.model_validate(cfg_data)
    turns = Turns(conn)

    class Watcher(StepWatcher):
        def before_step(self) -> None:
            turns.wait()  # before the clock starts: waiting for the other arm is not step time
            self.t, self.c = time.perf_counter(), time.process_time()

        def after_step(self, row: dict, drawn: list) -> None:
            wall, cpu = time.perf_counter() - self.t, time.process_time() - self.c
            timed = {k.removeprefix("time/"): v for k, v in row.items() if k.startswith("time/")}
            # the RODS machinery: curriculum + event writes, and the step row's write after time/step_s
            timed["hooks_s"] = row["time/curriculum_s"] + row["time/store_s"] + (wall - row["time/step_s"])
            timed.update(step_s=wall, cpu_s=cpu, tokens=row["train/tokens"], step=row["step"])
            turns.report(timed, ([t.id for t in drawn], {t.id: t for t in drawn}))

    train(cfg, log=lambda *_: None, watcher=Watcher())


class _PlainTimer(TrainerCallback):
    def __init__(self, turns: Turns):
        self.turns, self.report = turns, None

    def on_step_begin(self, args, state, control, **kw):
        self.turns.wait()
        self.t, self.c = time.perf_counter(), time.process_time()

    def rollout_done(self, report) -> None:
        self.report, self.rollout_end = report, time.perf_counter()

    def on_pre_optimizer_step(self, args, state, control, **kw):
        self.pre_opt = time.perf_counter()

    def on_optimizer_step(self, args, state, control, **kw):
        self.post_opt = time.perf_counter()

    def on_log(self, args, state, control, logs=None, **kw):
        if not logs or "loss" not in logs:
            return
        wall, cpu = time.perf_counter() - self.t, time.process_time() - self.c
        r = self.report
        timed = {k.removeprefix("time/"): v for k, v in r.timings.items()}
        timed.update(update_s=self.pre_opt - self.rollout_end, optimizer_s=self.post_opt - self.pre_opt)
        timed.update(hooks_s=0.0, step_s=wall, cpu_s=cpu, tokens=float(r.model_tokens), step=state.global_step)
        self.turns.report(timed, ([tid for tid, _ in r.groups], {}))


def _plain_arm(cfg_data: dict, work: str, conn) -> None:
    """Child process: the same trainer, model, seed and tasks with nothing of RODS around the step."""
    import torch

    from rods_core.trainer import RodsGRPOTrainer  # TRL's trainer: the child arms' only, not the parent's

    cfg = RunConfig.model_validate(cfg_data)
    apply_thread_policy(cfg.compute.threads)
    torch.manual_seed(cfg.seed)
    model, tokenizer, episode_cfg = _policy(cfg)
    turns = Turns(conn)
    timer = _PlainTimer(turns)
    tasks: dict = {}

    def draw(n: int) -> list[str]:
        ids, drawn = turns.given
        tasks.update(drawn)
        return ids

    trainer = RodsGRPOTrainer(
        model=model,
        tokenizer=tokenizer,
        cfg=cfg,
        out_dir=str(Path(work) / "plain"),
        draw=draw,
        task_of=tasks.__getitem__,
        on_rollout=timer.rollout_done,
        episode_cfg=episode_cfg,
        callbacks=[timer],
        benchmark=episode_benchmark(episode_cfg, "bfcl_multi_turn"),
    )
    trainer.train()


def alternate(cfg: RunConfig, work: Path, steps: int) -> tuple[list[dict], list[dict]]:
    """Both arms in their own processes, taking turns step by step; (rods rows, plain rows)."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")  # fresh interpreters: no torch thread pool or model state is inherited
    (r_here, r_there), (p_here, p_there) = ctx.Pipe(), ctx.Pipe()
    # not daemonic: the rods arm runs `train`, which serves its control database from a child process as a
    # real run does (a daemonic process may not start one); both are joined or terminated below
    procs = [
        ctx.Process(name="rods", target=_rods_arm, args=(cfg.model_dump(mode="json"), str(work), r_there)),
        ctx.Process(name="plain", target=_plain_arm, args=(cfg.model_dump(mode="json"), str(work), p_there)),
    ]
    for p in procs:
        p.start()
    rods_rows, plain_rows = [], []
    try:
        for _ in range(steps):
            r_here.send("go")
            row, drawn = _recv(r_here, procs[0])
            rods_rows.append({**row, "drawn": drawn[0]})
            p_here.send(drawn)  # the plain arm replays the rods arm's draw on the same tasks
            plain_row, plain_drawn = _recv(p_here, procs[1])
            plain_rows.append({**plain_row, "drawn": plain_drawn[0]})
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.terminate()
    return rods_rows, plain_rows


def _recv(conn, proc, timeout: float = 1800):
    """The next message from an arm, or a clear error if its process died instead."""
    deadline = time.monotonic() + timeout
    while not conn.poll(1.0):
        if not proc.is_alive():
            raise RuntimeError(f"systems: the {proc.name} arm exited (code {proc.exitcode}) in the middle of a step")
        if time.monotonic() > deadline:
            raise RuntimeError(f"systems: no step from the {proc.name} arm in {timeout:.0f} s")
    return conn.recv()


# ----- pure statistics ----------------------------------------------------------------------------------
def medians(rows: list[dict]) -> dict[str, float]:
    return {p: statistics.median(r[p] for r in rows) for p in PARTS}


def means(rows: list[dict]) -> dict[str, float]:
    return {p: statistics.fmean(r[p] for r in rows) for p in PARTS}


def overhead(
    rods: list[float], plain: list[float], boots: int = 2000, seed: int = 0, centre=statistics.fmean
) -> tuple[float, list[float]]:
    """100 x (centre(rods) / centre(plain) - 1) and a paired bootstrap 95% interval (steps resampled jointly).

    The headline centre is the mean: the ratio of the arms' total step time over the same steps, which is
    what the machinery adds to a run, each step's cost set against the identical work of the other arm
    (same draws, same tokens). The ratio of medians (centre=statistics.median), reported beside it, may set
    one arm's median step against a different step of the other — steps differ by 30% in their work — so
    it carries that variation too and decides nothing sooner."""
    n = min(len(rods), len(plain))
    r, p = np.asarray(rods[:n], dtype=float), np.asarray(plain[:n], dtype=float)
    draws = bootstrap_stat(lambda idx: 100 * (centre(r[idx]) / centre(p[idx]) - 1), n, boots=boots, seed=seed)
    return float(draws[0]), list(quantile_interval(draws[1:]))


def summarise(rods_rows: list[dict], plain_rows: list[dict]) -> dict:
    r, p = rods_rows[WARMUP:], plain_rows[WARMUP:]
    wall = [x["step_s"] for x in r], [x["step_s"] for x in p]
    cpu = [x["cpu_s"] for x in r], [x["cpu_s"] for x in p]
    pct, ci = overhead(*wall)
    cpu_pct, cpu_ci = overhead(*cpu)
    median_pct, median_ci = overhead(*wall, centre=statistics.median)
    direct = 100 * statistics.fmean(x["hooks_s"] for x in r) / statistics.fmean(x["step_s"] for x in p)
    same_tokens = [a["tokens"] for a in r] == [b["tokens"] for b in p]
    same_draws = [a["drawn"] for a in r] == [b["drawn"] for b in p]
    note = (
        ""
        if same_tokens
        else (
            "The arms generated different token counts on the same tasks (sampling diverged), so part of the "
            "difference is generation length, not machinery; the hook share is the machinery's direct cost."
        )
    )
    if ci[0] < 5.0 < ci[1]:
        note += " The interval straddles the 5% goal: this machine's noise is too large to decide it."
    drift = same_tokens and (ci[1] < 0 or cpu_ci[1] < 0)
    if drift:
        note += (
            " The rods arm was faster on identical work, which machinery cannot cause: the load of other jobs "
            "changed between the arms, so the end-to-end figure is not evidence either way; the hook share is."
        )
    return {
        "statistic": "ratio of total step time over the paired steps (paired bootstrap over steps)",
        "overhead_pct": round(pct, 2),
        "ci95_pct": [round(c, 2) for c in ci],
        "direct_pct": round(direct, 3),
        "overhead_cpu_pct": round(cpu_pct, 2),
        "ci95_cpu_pct": [round(c, 2) for c in cpu_ci],
        "median_ratio_pct": round(median_pct, 2),
        "median_ratio_ci95_pct": [round(c, 2) for c in median_ci],
        "same_tokens": same_tokens,
        "same_draws": same_draws,
        "drift": drift,
        "note": note.strip(),
    }


def measure_steps(config: Path, steps: int = 6, model: Path | None = None, log=print) -> dict | None:
    """Both arms on the config's model (or `model`); None when there is no model to time."""
    overrides = {
        "grpo.max_steps": steps + WARMUP,
        "grpo.save_steps": 1_000_000,
        "eval.every": 0,
        "eval.split": "train",
        "eval.limit": 1,  # the step-0 and final evaluations run outside the timed steps; keep them short
        "name": "systems",
    }
    if model is not None:
        overrides["model.path"] = str(model)
    cfg = load_config(config, overrides)
    if not (Path(cfg.model.path) / "config.json").exists():
        log(f"systems: no model at {cfg.model.path}; step timing skipped (build it or pass --model)")
        return None
    work = Path(tempfile.mkdtemp(prefix="rods-systems-"))
    cfg = cfg.model_copy(update={"output_dir": str(work / "runs"), "workspace": str(work / "ws")})
    log(f"systems: rods and plain arms, {steps + WARMUP} steps each, taking turns …")
    try:
        rods_rows, plain_rows = alternate(cfg, work, steps + WARMUP)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    timed = rods_rows[WARMUP:]
    gen_s = sum(x["gen_s"] for x in timed)
    return {
        "model": cfg.model.path,
        "tasks_per_step": cfg.grpo.tasks_per_step,
        "num_generations": cfg.grpo.num_generations,
        "warmup": WARMUP,
        "timed_steps": len(timed),
        "arms": "alternating step by step",
        "rods": {
            "breakdown_median_s": medians(timed),
            "breakdown_mean_s": means(timed),
            "rows": rods_rows,
            "tokens_per_gen_s": round(sum(x["tokens"] for x in timed) / gen_s, 1) if gen_s else None,
        },
        "plain": {
            "breakdown_median_s": medians(plain_rows[WARMUP:]),
            "breakdown_mean_s": means(plain_rows[WARMUP:]),
            "rows": plain_rows,
        },
        "overhead": summarise(rods_rows, plain_rows),
    }
