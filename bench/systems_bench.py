"""`rods bench systems`: one report of the system figures, written to bench/results/systems/.

Component figures come from the existing benchmarks (env_bench, synth_bench, buffer_bench,
store_bench; smaller workloads than their defaults so the whole report fits in minutes). The training
figures come from two arms on the same model, seed and tasks (step_overhead.py):
- rods: RodsGRPOTrainer driven by the full RunLoop (detector, replay buffer, synthesis worker,
  decisions, event log, pools snapshot) — what `rods train` runs, minus evaluation and checkpoints;
- plain: the same trainer, rollout_func and reward, but the tasks are replayed from the rods arm's
  draws and `on_rewards` does nothing: TRL's GRPO step with nothing of RODS around it.
Replaying the draws under the same torch seed makes both arms generate on the same tasks, so the
step-time difference is the machinery's, not the sampler's. Medians over the timed steps after one
warm-up step; the noise is a bootstrap 95% interval of the ratio of medians. The direct cost (time
inside the RODS hooks) is reported too; it is the lower-noise figure on a shared machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import time
from pathlib import Path

from bench import buffer_bench, env_bench, store_bench, synth_bench
from bench.step_overhead import measure_steps
from rods_lab.experiments.machine import describe
from rods_lab.experiments.machine import markdown as machine_md

RESULTS = Path("bench/results/systems")


def component_figures(quick: bool, log=print) -> dict:
    out = {}
    log("systems: environment …")
    out["env"] = env_bench.run(repeats=1)
    log("systems: synthesis …")
    out["synth"] = synth_bench.figures(limit=20 if quick else 100)
    log("systems: detector + buffer …")
    out["buffer"] = buffer_bench.run(steps=20 if quick else 100)  # ms per step; shares come with the step timing
    log("systems: store …")
    store_dir = RESULTS / "store-scratch"
    out["store"] = store_bench.run(rows=20_000 if quick else 300_000, out=store_dir, repeats=5 if quick else 20)
    shutil.rmtree(store_dir, ignore_errors=True)
    return out


def _p95(store: dict) -> float:
    return max(q["p95_ms"] for q in store["queries"].values())


def headline(components: dict, steps: dict | None) -> dict:
    """The headline figures, flat, with their goals where the project set one."""
    env, synth, buf, store = components["env"], components["synth"], components["buffer"], components["store"]
    h = {
        "env_calls_per_s": env["episode_calls_per_s"],
        "replay_ms_per_task": env["episode_ms_per_task"],
        "synth_accepted_per_s_cpu": synth["accepted_per_s_cpu"],
        "synth_acceptance_per_stage": {k: v["acceptance"] for k, v in synth["stages"].items()},
        "detector_buffer_ms_per_step_32x16": buf["batch_32x16_pool_400_seeds_pmax_50"]["ms_mean"],
        "store_write_share_of_step_pct": store["write_share_of_step"]["mean_pct"],
        "store_query_p95_ms_worst": _p95(store),
    }
    if steps:
        h.update(
            {
                "generation_tokens_per_s": steps["rods"]["tokens_per_gen_s"],
                "step_breakdown_s": steps["rods"]["breakdown_median_s"],
                "rods_hooks_share_of_step_pct": steps["overhead"]["direct_pct"],
                "overhead_pct": steps["overhead"]["overhead_pct"],
                "overhead_ci95_pct": steps["overhead"]["ci95_pct"],
                "overhead_cpu_pct": steps["overhead"]["overhead_cpu_pct"],
                "overhead_cpu_ci95_pct": steps["overhead"]["ci95_cpu_pct"],
            }
        )
    return h


def markdown(report: dict) -> str:
    h, c = report["headline"], report["components"]
    st = report.get("steps")
    lines = [
        "# System figures",
        "",
        machine_md(report["machine"]),
        "",
        "| figure | measured | goal |",
        "|---|---|---|",
        # the goals (>= 5,000 calls/s, <= 2 ms) were set on raw execution; these time whole reference episodes
        f"| environment tool calls / s (one core, reference episodes through the protocol) | {h['env_calls_per_s']} | — |",
        f"| reference episode (messages, parse, execute, check), ms per task | {h['replay_ms_per_task']} | — |",
        f"| synthesis accepted variants / s (CPU time) | {h['synth_accepted_per_s_cpu']} "
        f"({c['synth']['parents']} parents) | >= 50 |",
        f"| synthesis acceptance per stage | {', '.join(f'{k} {v:.0%}' for k, v in h['synth_acceptance_per_stage'].items() if v is not None)} | |",
        f"| detector + buffer, ms per step (32 x 16 batch, 400 seeds) | {h['detector_buffer_ms_per_step_32x16']} | — |",
        f"| store write, % of a step (store bench's step) | {h['store_write_share_of_step_pct']} | <= 2 |",
        f"| store query p95, worst app query (ms, {c['store']['rows']['task_stats']:,} rows) | {h['store_query_p95_ms_worst']} | <= 300 |",
    ]
    if st:
        o = st["overhead"]
        lines += [
            f"| generation tokens / s (tiny model, in rollouts) | {h['generation_tokens_per_s']} | |",
            f"| rods step over plain TRL GRPO step (total time of the paired steps) | {o['overhead_pct']:+.1f}% (95% CI {o['ci95_pct'][0]:+.1f}% .. {o['ci95_pct'][1]:+.1f}%) | <= 5% |",
            f"| same, process CPU time per step (all threads) | {o['overhead_cpu_pct']:+.1f}% (95% CI {o['ci95_cpu_pct'][0]:+.1f}% .. {o['ci95_cpu_pct'][1]:+.1f}%) | <= 5% |",
            f"| same, ratio of median steps | {o['median_ratio_pct']:+.1f}% (95% CI {o['median_ratio_ci95_pct'][0]:+.1f}% .. {o['median_ratio_ci95_pct'][1]:+.1f}%) | |",
            f"| time inside RODS hooks, % of the plain step | {o['direct_pct']:.2f}% | |",
            "",
            f"Step timing: {st['model']}, {st['tasks_per_step']} tasks x {st['num_generations']} rollouts, "
            f"{st['timed_steps']} timed steps per arm after {st['warmup']} warm-up; same seed and tasks in both arms "
            f"(same draws: {o['same_draws']}).",
            "",
            "| step part (s, mean of the paired steps; median) | rods | plain |",
            "|---|---|---|",
        ]
        rods_mean, plain_mean = st["rods"]["breakdown_mean_s"], st["plain"]["breakdown_mean_s"]
        rods_median, plain_median = st["rods"]["breakdown_median_s"], st["plain"]["breakdown_median_s"]
        for part in rods_mean:
            lines.append(
                f"| {part} | {rods_mean[part]:.3f}; {rods_median[part]:.3f} | "
                f"{plain_mean[part]:.3f}; {plain_median[part]:.3f} |"
            )
        if o["note"]:
            lines += ["", o["note"]]
    return "\n".join(lines) + "\n"


def run(
    config: Path = Path("configs/demo-cpu.yaml"),
    steps: int = 6,
    model: Path | None = None,
    quick: bool = False,
    log=print,
) -> dict:
    RESULTS.mkdir(parents=True, exist_ok=True)
    machine = describe()
    components = component_figures(quick, log)
    log("systems: training steps (the rods and plain arms take turns) …")
    step_figs = measure_steps(config, steps=steps, model=model, log=log)
    report = {
        "machine": machine,
        "headline": headline(components, step_figs),
        "components": components,
        "steps": step_figs,
        "overhead": step_figs["overhead"] if step_figs else None,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    text = markdown(report)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    blob = json.dumps(report, indent=2, default=str)
    for name in (f"systems-{stamp}", "latest"):
        (RESULTS / f"{name}.json").write_text(blob)
        (RESULTS / f"{name}.md").write_text(text)
    log(f"systems: wrote {RESULTS / f'systems-{stamp}.md'}")
    return {"json": report, "markdown": text}


def main(argv: list[str] | None = None) -> None:
    """`rods bench systems`' script: the report on stdout (Markdown, or `--json`); progress and TRL's step logs go
    to stderr."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the JSON report instead of Markdown")
    parser.add_argument("--config", type=Path, default=Path("configs/demo-cpu.yaml"), help="the step timing's config")
    parser.add_argument("--steps", type=int, default=6, help="timed training steps per arm (after one warm-up step)")
    parser.add_argument("--model", type=Path, default=None, help="model folder for the step timing")
    parser.add_argument("--quick", action="store_true", help="smaller store and synthesis workloads (for tests)")
    a = parser.parse_args(argv)
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)  # TRL's step logs and the arms' processes print: stdout carries only the report
    try:
        with contextlib.redirect_stdout(sys.stderr):
            report = run(a.config, steps=a.steps, model=a.model, quick=a.quick, log=lambda m: print(m, file=sys.stderr))
    finally:
        os.dup2(saved, 1)
        os.close(saved)
    if a.json:
        print(json.dumps(report["json"], indent=2, default=str))
    else:
        print(report["markdown"], end="")


if __name__ == "__main__":
    main()
