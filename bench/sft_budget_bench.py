"""The demo warm start's budget, chosen by measurement: one SFT at the demo config's full budget, the model saved
every half-epoch, each snapshot scored as the warm start's quality is (greedy on the demo seeds: format validity,
progress, accuracy; 8 samples at T = 1: the share of seeds whose rewards differ; greedy on held-out variants),
and the smallest budget whose figures stay within noise of the full budget's picked by `sft_budget.pick_budget`.

The warmup-then-constant learning rate and the seeded data order do not depend on the step budget, so a snapshot
at step s is the model a build with a budget of s steps makes: one run measures every shorter budget.
Run (a folder of your own, never the demo model's):
    python -m bench.sft_budget_bench train --out /tmp/sft-budget      # init-tiny + SFT, snapshots/
    python -m bench.sft_budget_bench score --out /tmp/sft-budget      # scores/, waits for snapshots until done
    python -m bench.sft_budget_bench pick --out /tmp/sft-budget       # the table and the rule's verdict
Another arm against the same full build: `train --out /tmp/b --lr 1e-3 --tokens N`, then `score` and `pick` with
`--out /tmp/b --reference /tmp/sft-budget`; its own end is scored as `end`. A decaying schedule (`--schedule
cosine --every 100`) depends on its budget, so only that end is a budget's model: one run per budget. A file
scores/<snapshot>.lock keeps a snapshot unscored (a scorer holds one while it scores; a second scorer takes the
next snapshot).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import get_args

from bench.demo_model import demo_tasks
from bench.sft_budget import SETS, Scored, budget_table, failures_greedy, pick_budget
from rods_core.benchmarks.registry import make_benchmark
from rods_core.config import SFTSettings, load_config
from rods_core.evaluation import evaluate, variance_report
from rods_core.policy.sft import run_sft, tokenize_demonstrations
from rods_core.policy.tiny import init_tiny, load_policy, read_card, write_card
from rods_core.ranks import under_launcher
from rods_core.tasksets import fresh_variants, run_benchmark
from rods_core.threads import apply_thread_policy

ROOT = Path(__file__).resolve().parent.parent


def _snapshot_callback(out: Path, init: Path, tokenizer, every: float, per_step_tokens: float):
    """A TrainerCallback that saves the model (with the init model's card) each time training crosses a
    multiple of `every` epochs, and logs step, epoch and tokens to out/snapshots.jsonl."""
    from transformers import TrainerCallback

    class Snapshots(TrainerCallback):
        def __init__(self):
            self.last = 0

        def on_step_end(self, args, state, control, model=None, **kw):
            k = math.floor(float(state.epoch or 0) / every + 1e-6)
            if k <= self.last or not state.is_world_process_zero:
                self.last = max(self.last, k)
                return
            self.last = k
            folder = out / "snapshots" / f"e{k * every:05.2f}"
            model.save_pretrained(folder)
            tokenizer.save_pretrained(folder)
            write_card(folder, read_card(init))
            row = {"name": folder.name, "epoch": round(float(state.epoch), 3), "step": state.global_step}
            row["tokens"] = round(state.global_step * per_step_tokens)
            with (out / "snapshots.jsonl").open("a") as f:
                f.write(json.dumps(row) + "\n")

    return Snapshots()


def train(out: Path, config: Path, processes: int, every: float, sft: dict) -> None:
    """init-tiny (before the hand-off to the launcher), then the demo config's SFT (`sft`: settings changed, e.g.
    a learning rate) with snapshots."""
    cfg = load_config(config)
    settings = cfg.model.sft.model_copy(update=sft)
    init = out / "init"
    if not under_launcher():
        init_tiny(cfg.model.tiny, init)
        if processes > 1:
            cmd = [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", str(processes)]
            cmd += ["--num_machines", "1", "--config_file", str(ROOT / "configs" / "accelerate" / "cpu.yaml")]
            os.execv(sys.executable, [*cmd, "-m", "bench.sft_budget_bench", *sys.argv[1:]])
    apply_thread_policy(cfg.compute.threads)
    seeds = demo_tasks()
    tasks = seeds + fresh_variants(seeds, cfg.model.sft_variants_per_seed, cfg, "warm-start", run_benchmark(cfg))
    _, tokenizer, prompt = load_policy(init)
    rows = tokenize_demonstrations(tasks, tokenizer, make_benchmark("bfcl_multi_turn", prompt=prompt))
    per_step = sum(len(r["input_ids"]) for r in rows) / len(rows) * settings.batch_size * processes
    snap = _snapshot_callback(out, init, tokenizer, every, per_step)
    figures = run_sft(init, out / "full", tasks, settings, callbacks=[snap], show_progress=False)
    if os.environ.get("RANK", "0") == "0":
        figures["sft/epoch_tokens"] = sum(len(r["input_ids"]) for r in rows)
        (out / "sft.json").write_text(json.dumps(figures, indent=2) + "\n")


def held_out(cfg) -> list:
    """Fresh variants of the demo seeds under another purpose, minus any the warm start trains on."""
    seeds, bench = demo_tasks(), run_benchmark(cfg)
    trained = {
        t.content_key() for t in fresh_variants(seeds, cfg.model.sft_variants_per_seed, cfg, "warm-start", bench)
    }
    return [t for t in fresh_variants(seeds, 2, cfg, "warmstart-heldout", bench) if t.content_key() not in trained]


def score_one(model: Path, seeds: list, heldout: list, full: dict | None = None) -> dict:
    """The warm start's quality figures (as `rods sft --samples 8` reports them) plus held-out greedy figures;
    per-task results kept for intervals. Given the full build's scores, a snapshot whose greedy figures already
    fail the rule skips the 8 samples a task (the slow part: its verdict cannot change)."""
    out = {"seeds": evaluate(model, seeds), "heldout": evaluate(model, heldout)}
    failed = (
        failures_greedy({s: out[s]["per_task"] for s in SETS}, {s: full[s]["per_task"] for s in SETS}) if full else []
    )
    out["sampled"] = {"skipped": failed} if failed else variance_report(model, seeds, samples=8)
    return out


def _order(names: list[str]) -> list[str]:
    """The full build first, then whole epochs from the largest down, then half-epochs from the largest down: the
    rule reads budgets from the top until one fails, and a well-trained model's episodes end early (fast)."""

    def key(name: str) -> tuple:
        if name in ("full", "end"):
            return (0, 0.0)
        epoch = float(name[1:])
        return (1 if epoch == int(epoch) else 2, -epoch)

    return sorted(names, key=key)


def score(out: Path, config: Path, wait: bool, reference: Path | None = None) -> None:
    """Score every snapshot once, in `_order`, once the full build is scored; with `wait`, poll until all are.
    `reference`: another run's folder whose full build the snapshots are compared with (this run's own end is
    then not scored as a full build)."""
    apply_thread_policy(1)
    cfg = load_config(config)
    seeds, heldout = demo_tasks(), held_out(cfg)
    scores = out / "scores"
    scores.mkdir(parents=True, exist_ok=True)
    full_scores = (reference or out) / "scores" / "full.json"
    while True:
        names = [p.name for p in (out / "snapshots").glob("e*") if (p / "model.safetensors").exists()]
        done = (out / "sft.json").exists()
        names += ["full" if reference is None else "end"] if done else []  # "end": this run's own end
        todo = [n for n in _order(names) if not (scores / f"{n}.json").exists() and not (scores / f"{n}.lock").exists()]
        if done and not todo:
            return
        if not todo or todo[0] != "full" and not full_scores.exists():
            if not wait:
                return
            time.sleep(30)
            continue
        name = todo[0]
        (scores / f"{name}.lock").touch()  # a second scorer takes the next one
        full = json.loads(full_scores.read_text()) if name != "full" else None
        model = out / ("full" if name in ("full", "end") else f"snapshots/{name}")
        t0 = time.perf_counter()
        result = score_one(model, seeds, heldout, full)
        (scores / f"{name}.json").write_text(json.dumps(result, default=str) + "\n")
        (scores / f"{name}.lock").unlink()
        print(f"{name}: scored in {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)


def pick(out: Path, reference: Path | None = None) -> dict:
    """The per-budget table and the rule's choice (bench/sft_budget.py); `reference`: the run whose full build
    the snapshots are compared with (default: this run's own)."""
    snapshots = out / "snapshots.jsonl"  # none with a decaying schedule (only its end is a budget's model)
    lines = snapshots.read_text().splitlines() if snapshots.exists() else []
    rows = [(out / "scores" / f"{r['name']}.json", r) for r in map(json.loads, lines)]
    ends = [(reference or out, "full")] + ([(out, "end")] if reference else [])
    for folder, name in ends:
        sft = json.loads((folder / "sft.json").read_text())
        end = {"epoch": sft["sft/epochs"], "step": sft["sft/steps"], "tokens": sft["sft/tokens"]}
        rows.append((folder / "scores" / f"{name}.json", end))
    scored = []
    for path, row in rows:
        if path.exists():
            scored.append(Scored.from_scores(row["epoch"], row["step"], row["tokens"], json.loads(path.read_text())))
    scored.sort(key=lambda s: s.step)
    verdict = pick_budget(scored)
    return {"table": budget_table(scored), "verdict": verdict.as_dict()}


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", choices=["train", "score", "pick"])
    p.add_argument("--out", type=Path, required=True, help="a folder of your own (never models/tiny-demo)")
    p.add_argument("--config", type=Path, default=ROOT / "configs" / "demo-cpu.yaml", help="the demo run config")
    p.add_argument("--processes", type=int, default=2, help="SFT processes (the config's compute.processes)")
    p.add_argument("--every", type=float, default=0.5, help="epochs between snapshots")
    p.add_argument("--no-wait", action="store_true", help="score what is there and stop")
    p.add_argument("--reference", type=Path, default=None, help="score/pick: compare with this run's full build")
    p.add_argument("--lr", type=float, default=None, help="train: another SFT learning rate than the config's")
    p.add_argument("--tokens", type=int, default=None, help="train: another SFT token budget than the config's")
    p.add_argument("--seed", type=int, default=None, help="train: another SFT seed (data order) than the config's")
    p.add_argument(
        "--schedule",
        choices=get_args(SFTSettings.model_fields["lr_schedule"].annotation),
        default=None,
        help="train: another learning-rate schedule (a decaying one depends on the budget: only the end is a "
        "budget's model, scored as `end` against --reference)",
    )
    a = p.parse_args()
    if a.what == "train":
        changed = {"learning_rate": a.lr, "token_budget": a.tokens, "lr_schedule": a.schedule, "seed": a.seed}
        train(a.out, a.config, a.processes, a.every, {k: v for k, v in changed.items() if v is not None})
    elif a.what == "score":
        score(a.out, a.config, not a.no_wait, a.reference)
    else:
        print(json.dumps(pick(a.out, a.reference), indent=2))
