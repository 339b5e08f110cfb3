"""Step timing of a rods step against a plain TRL GRPO step on the same model, seed and tasks.

The rods arm is `rods train` minus evaluation and checkpoints: RodsGRPOTrainer + RunLoop (detector,
replay buffer, synthesis worker threads, decisions, event log). It records the task ids it drew.
The plain arm builds the model from the same folder under the same seed and replays those draws
through the same trainer, rollout_func and reward, with a no-op `on_rewards` and no loop callback:
what TRL's GRPOTrainer does with a multi-turn rollout_func and nothing else. A step is timed from
`on_step_begin` to the end of its `on_log` (where the rods loop writes its step row), in both arms,
in wall time and in the arm's process CPU time (all threads, synthesis included).

The arms run in two processes that take turns step by step (rods step k, then plain step k with the
same draws, then rods step k+1, …), so a change in the load of other jobs hits both arms alike instead
of whichever arm ran while it lasted; the interval is a bootstrap over the paired steps.
"""

from __future__ import annotations

import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from transformers import TrainerCallback

from rods_core.config import RunConfig, load_config

WARMUP = 1
PARTS = ("gen_s", "env_s", "reward_s", "hooks_s", "opt_s", "step_s", "cpu_s")


class StepTimer(TrainerCallback):
    """Per step: wall time, the trainer's rollout timings, model tokens generated, and hook seconds."""

    def __init__(self, hook_seconds: list[float] | None = None, turns: Turns | None = None):
        self.trainer = None
        self.rows: list[dict] = []
        self.hook_seconds = hook_seconds  # filled by the rods arm's wrapped hooks, drained per step
        self.turns = turns
        self._t = self._c = 0.0

    def on_step_begin(self, args, state, control, **kw):
        if self.turns is not None:
            self.turns.wait()  # before the clock starts: waiting for the other arm is not step time
        self._t, self._c = time.perf_counter(), time.process_time()

    def on_log(self, args, state, control, logs=None, **kw):
        if not logs or "loss" not in logs:
            return
        wall, cpu = time.perf_counter() - self._t, time.process_time() - self._c
        t = dict(self.trainer.timings)
        hooks = sum(self.hook_seconds) if self.hook_seconds is not None else 0.0
        if self.hook_seconds is not None:
            self.hook_seconds.clear()
        row = {
            "step": state.global_step,
            "step_s": wall,
            "cpu_s": cpu,
            "gen_s": t.get("time/gen_s", 0.0),
            "env_s": t.get("time/env_s", 0.0),
            "reward_s": t.get("time/reward_s", 0.0),
            "hooks_s": hooks,
            "tokens": sum(e.model_tokens for e in self.trainer.last_episodes),
        }
        row["opt_s"] = max(wall - row["gen_s"] - row["env_s"] - row["reward_s"] - hooks, 0.0)
        self.rows.append(row)
        if self.turns is not None:
            self.turns.report(row)


def _timed(fn, sink: list[float]):
    def wrapper(*a, **kw):
        t0 = time.perf_counter()
        try:
            return fn(*a, **kw)
        finally:
            sink.append(time.perf_counter() - t0)

    return wrapper


def _policy(cfg: RunConfig):
    from rods_core.policy.tiny import load_policy, read_card

    model, tokenizer, card_prompt = load_policy(Path(cfg.model.path))
    prompt = card_prompt if read_card(Path(cfg.model.path)) else cfg.episode.prompt
    hints = cfg.episode.hints or cfg.method == "env_augment"
    return model, tokenizer, cfg.episode.model_copy(update={"prompt": prompt, "hints": hints})


class Turns:
    """Hands the turn over at step boundaries: waits for "go" before a step, reports the step after its row.

    The rods arm reports the task ids it drew during the step and those tasks (after its clock stopped); the
    plain arm gets both with its "go".
    """

    def __init__(self, conn):
        self.conn, self.given = conn, None
        self.drawn: tuple[list[str], dict] | None = None  # (ids, {id: task record}) of this step's draw

    def wait(self) -> None:
        self.given = self.conn.recv()

    def report(self, row: dict) -> None:
        self.conn.send((row, self.drawn))


def _rods_arm(cfg_data: dict, work: str, conn) -> None:
    """Child process: train with the full loop, one step per turn."""
    import torch

    from rods_core.loop import STATE_FILE, RunLoop, select_seeds
    from rods_core.trainer import LoopCallback, RodsGRPOTrainer

    cfg = RunConfig.model_validate(cfg_data)
    torch.manual_seed(cfg.seed)
    seeds = select_seeds(cfg)
    model, tokenizer, episode_cfg = _policy(cfg)
    run_id = f"systems-{random.Random().randrange(16**6):06x}"
    run_dir = Path(work) / "runs" / run_id
    run_dir.mkdir(parents=True)
    loop = RunLoop(cfg, run_dir, run_id, seeds)
    loop.db.create_run(run_id, run_dir, cfg.model_dump(mode="json"), cfg.method, name="systems")
    hooks: list[float] = []
    turns = Turns(conn)

    def draw(n: int) -> list[str]:
        ids = loop.draw(n)
        turns.drawn = (ids, {t: loop.source.task(t) for t in ids})
        return ids

    loop.on_log = _timed(loop.on_log, hooks)  # the step row, flush and heartbeat: part of a rods step
    timer = StepTimer(hooks, turns)
    callback = LoopCallback(loop, lambda step: None, 0, STATE_FILE)
    trainer = RodsGRPOTrainer(
        model=model,
        tokenizer=tokenizer,
        cfg=cfg,
        out_dir=str(run_dir / "checkpoints"),
        draw=_timed(draw, hooks),
        task_of=loop.source.task,
        on_rewards=_timed(loop.on_rewards, hooks),
        episode_cfg=episode_cfg,
        callbacks=[callback, timer],
    )
    callback.trainer = timer.trainer = trainer
    try:
        trainer.train()
    finally:
        loop.close()


def _plain_arm(cfg_data: dict, work: str, conn) -> None:
    """Child process: the same trainer, model, seed and tasks with nothing of RODS around the step."""
    import torch

    from rods_core.tasks import Task
    from rods_core.trainer import RodsGRPOTrainer

    cfg = RunConfig.model_validate(cfg_data)
    torch.manual_seed(cfg.seed)
    model, tokenizer, episode_cfg = _policy(cfg)
    turns = Turns(conn)
    timer = StepTimer(turns=turns)
    tasks: dict[str, Task] = {}

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
        on_rewards=lambda step, groups, extras: None,
        episode_cfg=episode_cfg,
        callbacks=[timer],
    )
    timer.trainer = trainer
    trainer.train()


def alternate(cfg: RunConfig, work: Path, steps: int) -> tuple[list[dict], list[dict]]:
    """Both arms in their own processes, taking turns step by step; (rods rows, plain rows)."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")  # fresh interpreters: no torch thread pool or model state is inherited
    (r_here, r_there), (p_here, p_there) = ctx.Pipe(), ctx.Pipe()
    procs = [
        ctx.Process(name="rods", target=_rods_arm, args=(cfg.model_dump(mode="json"), str(work), r_there), daemon=True),
        ctx.Process(
            name="plain", target=_plain_arm, args=(cfg.model_dump(mode="json"), str(work), p_there), daemon=True
        ),
    ]
    for p in procs:
        p.start()
    rods_rows, plain_rows = [], []
    try:
        for _ in range(steps):
            r_here.send("go")
            row, drawn = _recv(r_here, procs[0])
            rods_rows.append(row)
            p_here.send(drawn)  # the plain arm replays the rods arm's draw on the same tasks
            plain_rows.append(_recv(p_here, procs[1])[0])
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


def overhead(rods: list[float], plain: list[float], boots: int = 2000, seed: int = 0) -> tuple[float, list[float]]:
    """100 x (median rods / median plain - 1) and a paired bootstrap 95% interval (steps resampled jointly)."""
    n = min(len(rods), len(plain))
    rods, plain = rods[:n], plain[:n]
    point = 100 * (statistics.median(rods) / statistics.median(plain) - 1)
    rng, stats = random.Random(seed), []
    for _ in range(boots):
        idx = [rng.randrange(n) for _ in range(n)]
        stats.append(100 * (statistics.median(rods[i] for i in idx) / statistics.median(plain[i] for i in idx) - 1))
    stats.sort()
    return point, [stats[int(0.025 * boots)], stats[int(0.975 * boots) - 1]]


def summarise(rods_rows: list[dict], plain_rows: list[dict]) -> dict:
    r, p = rods_rows[WARMUP:], plain_rows[WARMUP:]
    pct, ci = overhead([x["step_s"] for x in r], [x["step_s"] for x in p])
    cpu_pct, cpu_ci = overhead([x["cpu_s"] for x in r], [x["cpu_s"] for x in p])
    direct = 100 * statistics.median(x["hooks_s"] for x in r) / statistics.median(x["step_s"] for x in p)
    same_tokens = [a["tokens"] for a in r] == [b["tokens"] for b in p]
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
        "overhead_pct": round(pct, 2),
        "ci95_pct": [round(c, 2) for c in ci],
        "direct_pct": round(direct, 3),
        "overhead_cpu_pct": round(cpu_pct, 2),
        "ci95_cpu_pct": [round(c, 2) for c in cpu_ci],
        "same_tokens": same_tokens,
        "drift": drift,
        "note": note.strip(),
    }


def measure_steps(config: Path, steps: int = 6, model: Path | None = None, log=print) -> dict | None:
    """Both arms on the config's model (or `model`); None when there is no model to time."""
    overrides = {"grpo.max_steps": steps + WARMUP, "grpo.save_steps": 1_000_000, "eval.every": 0, "name": "systems"}
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
        "same_draws": True,
        "arms": "alternating step by step",
        "rods": {
            "breakdown_median_s": medians(timed),
            "rows": rods_rows,
            "tokens_per_gen_s": round(sum(x["tokens"] for x in timed) / gen_s, 1) if gen_s else None,
        },
        "plain": {"breakdown_median_s": medians(plain_rows[WARMUP:]), "rows": plain_rows},
        "overhead": summarise(rods_rows, plain_rows),
    }
