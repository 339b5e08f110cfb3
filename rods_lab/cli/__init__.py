"""The `rods` command: thin typer shells over the library, one module per command group.

Heavy imports (torch, TRL, transformers) happen inside the commands that train, never at import time,
so `rods --help`, `rods env ...`, `rods seeds ...` and `rods export` start in well under a second.
"""

from __future__ import annotations

import sys

import typer

from rods_core.ranks import die_with_launcher
from rods_core.tracking import network_off_by_default
from rods_lab.cli import bench_cmd, env_cmd, model_cmd, plan_cmd, policy_cmd, seeds_cmd, store_cmd, synth_cmd, train_cmd
from rods_lab.cli._common import config_notes_on_stderr, one_document, prints_document

app = typer.Typer(
    no_args_is_help=True, add_completion=False, help="RODS Lab: online data synthesis for GRPO tool-use agents."
)
app.add_typer(seeds_cmd.app, name="seeds")
app.add_typer(env_cmd.app, name="env")
app.add_typer(bench_cmd.app, name="bench")
app.add_typer(model_cmd.app, name="model")
app.command("sft")(policy_cmd.sft)
app.command("eval")(policy_cmd.eval_cmd)
app.add_typer(train_cmd.config_app, name="config")
app.command("train")(train_cmd.train)
app.command("plan")(plan_cmd.plan)
app.command("synth")(synth_cmd.synth)
app.command("export")(store_cmd.export)
app.add_typer(store_cmd.runs_app, name="runs")


def main() -> None:
    die_with_launcher()  # a worker of `accelerate launch` never outlives its launcher
    network_off_by_default()  # before anything imports huggingface_hub; inherited by accelerate's processes
    config_notes_on_stderr()
    if prints_document(sys.argv[1:]):
        with one_document():  # stdout is the JSON document only; libraries' chatter goes to stderr
            app()
    else:
        app()
