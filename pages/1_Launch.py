"""Launch: pick a config, edit its fields (validated by RunConfig, errors beside the fields), start a run."""

from __future__ import annotations

import warnings

import streamlit as st
from pydantic import ValidationError

from rods_core.config import METHODS, ConfigError, ConfigRenamedWarning, load_config, parse_overrides
from rods_core.config.benchmark_entries import benchmark_entry, benchmark_names
from rods_core.config.inputs import DoorError
from rods_lab import identity, ui
from rods_lab.configs import build_config, default_processes, field_errors, list_configs
from rods_lab.launch import launch_pair, launch_run
from rods_lab.option_form import option_widgets
from rods_lab.prefs import read_prefs
from rods_lab.status import LOG_FILE, tail

ui.page_setup(__file__)
paths = ui.paths()
configs = {p.stem: p for p in list_configs()}
name = st.selectbox(
    "Config", list(configs), index=list(configs).index("demo-cpu") if "demo-cpu" in configs else 0, key="launch_config"
)
try:
    base = load_config(configs[name])
except ConfigError as e:
    st.error(str(e))
    st.stop()
errors: dict[str, str] = st.session_state.get("launch_errors", {})


def err(field: str, where=st) -> None:
    """Show a validation error right under its field."""
    if field in errors:
        where.error(f"`{field}`: {errors[field]}")


# outside the form, so its own options below are redrawn as soon as another benchmark is picked
names = benchmark_names()
benchmark = st.selectbox(
    "Benchmark",
    names,
    index=names.index(base.benchmark) if base.benchmark in names else 0,
    key="launch_benchmark",
    help="the task family trained and evaluated; its own options are drawn from its entry's schema",
)
err("benchmark")
entry = benchmark_entry(benchmark)

with st.form("launch_form"):
    a, b, c = st.columns(3)
    run_name = a.text_input("Name", base.name, key="launch_name")
    err("name", a)
    method = b.selectbox("Method", METHODS, index=METHODS.index(base.method), key="launch_method")
    err("method", b)
    review = c.radio(
        "Synthesized variants",
        ["auto", "gated"],
        horizontal=True,
        key="launch_review",
        index=["auto", "gated"].index(read_prefs(paths).get("review", base.buffer.review)),
        help="gated: variants wait in staged for your approval on the Review page",
    )
    model_path = a.text_input("Model folder (workspace or models/)", base.model.path, key="launch_model")
    err("model.path", a)
    subset = b.selectbox(
        "Seeds", ["demo", "all", "file"], index=["demo", "all", "file"].index(base.seeds.subset), key="launch_subset"
    )
    err("seeds", b)
    limit = c.number_input("Seed limit (0 = all)", 0, 100_000, base.seeds.limit or 0, key="launch_limit")
    steps = a.number_input("GRPO steps", 1, 1_000_000, base.grpo.max_steps, key="launch_steps")
    err("grpo.max_steps", a)
    gens = b.number_input("Rollouts per task (G)", 2, 256, base.grpo.num_generations, key="launch_gens")
    tasks = c.number_input("Tasks per step (per process)", 1, 1024, base.grpo.tasks_per_step, key="launch_tasks")
    procs = a.number_input(
        "Processes", 1, 64, default_processes(base), key="launch_procs", help="one torch thread each"
    )
    pair = b.checkbox(
        "Also launch a static twin", key="launch_pair", help="same seeds, budget and seed; compare them on Compare"
    )
    if entry.option_names():
        st.caption(f"{benchmark}'s own options (`benchmark_options`)")
    current = base.benchmark_options if benchmark == base.benchmark else {}
    options = option_widgets(entry.load_options_model(), current, f"launch_opt_{benchmark}", st)
    err("benchmark_options")
    more = st.text_area(
        "More fields (key.path=value per line)",
        key="launch_more",
        placeholder="eval.every=5\nbuffer.p_max=10\nseeds.file=subsets/mine.jsonl",
    )
    submitted = st.form_submit_button("Launch", type="primary")

if submitted:
    overrides = {
        "name": run_name,
        "method": method,
        "benchmark": benchmark,
        "benchmark_options": options,
        "buffer.review": review,
        "model.path": model_path,
        "seeds.subset": subset,
        "seeds.limit": int(limit) or None,
        "grpo.max_steps": int(steps),
        "grpo.num_generations": int(gens),
        "grpo.tasks_per_step": int(tasks),
        "compute.processes": int(procs),
    }
    try:
        with warnings.catch_warnings(record=True) as notes:  # a renamed key (synth.x) still works, with a note
            warnings.simplefilter("always", ConfigRenamedWarning)
            cfg = build_config(configs[name], {**overrides, **parse_overrides(more, "more fields")}, paths)
        me = identity.current()
        policy = ui.launch_policy()
        launched_all = (
            launch_pair(cfg, paths, actor=me, policy=policy)
            if pair
            else [launch_run(cfg, paths, actor=me, policy=policy)]
        )
        launched = launched_all[0]
    except ValidationError as e:
        st.session_state["launch_errors"] = field_errors(e)
        st.rerun()
    except (DoorError, FileExistsError, ValueError, identity.Refused) as e:  # config, paths, seeds, model, role
        st.session_state["launch_errors"] = {"(config)": str(e)}
        st.rerun()
    else:
        st.session_state["launch_errors"] = {}
        st.session_state["lab_run"] = launched.run_id
        st.session_state["compare_runs"] = [r.run_id for r in launched_all]  # Compare opens on them
        ui.refresh()
        for note in notes:
            if issubclass(note.category, ConfigRenamedWarning):
                st.info(str(note.message))
        ids = ", ".join(f"`{r.run_id}`" for r in launched_all)
        st.success(
            f"Launched {ids}; runs keep going if you close the app."
            + (" Compare shows them side by side." if pair else "")
        )
shown = {"name", "method", "model.path", "seeds", "grpo.max_steps", "benchmark", "benchmark_options"}
for field, msg in errors.items():
    if field not in shown:
        st.error(f"`{field}`: {msg}")


@st.fragment(run_every=ui.LIVE_S)
def log_panel() -> None:
    st.subheader("Log")
    run = ui.pick_run("launch", empty="No runs yet: the log of the run you launch above shows here.")
    if run is not None:
        st.code(tail(f"{run.out_dir}/{LOG_FILE}", 40) or "(no log: launched outside the app)", language="text")


log_panel()
