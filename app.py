"""RODS Lab — the entry point (navigation) and Home: the runs, their status, progress and ETA, key curves;
stop a run. Run: `make app`."""

from __future__ import annotations

from types import SimpleNamespace

import streamlit as st

import lab_ui
from rods_core import charts, lab
from rods_core.launch import format_eta, progress

st.set_page_config(page_title="RODS Lab", page_icon="🧭", layout="wide")
STATUS_ICON = {
    "queued": ":gray[:material/schedule:]",
    "running": ":green[:material/play_circle:]",
    "finished": ":blue[:material/check_circle:]",
    "failed": ":red[:material/error:]",
    "stopped": ":gray[:material/stop_circle:]",
    "lost": ":orange[:material/warning:]",
    "stale": ":orange[:material/hourglass_empty:]",
    "waiting": ":gray[:material/hourglass_top:]",
    "building": ":violet[:material/construction:]",
    "build failed": ":red[:material/error:]",
}


@st.cache_data(ttl=lab_ui.LIVE_S, show_spinner=False)
def curves(run_dir: str):
    return lab_ui.reader(run_dir).query(
        'SELECT step, "reward/mean", "boundary/informative_share", "time/step_s" FROM step ORDER BY step'
    )


def run_card(run: SimpleNamespace) -> None:
    with st.container(border=True):
        df = curves(run.out_dir)
        build = lab.build_view(run.out_dir, run.status, not df.empty)  # the model build, before the first step
        shown = build.status if build else run.status
        head, stop = st.columns([5, 1])
        head.markdown(f"**{run.name}** · `{run.id}` · {run.method} · {STATUS_ICON.get(shown, '')} {shown}")
        if run.status in ("queued", "running", "stale") and stop.button("Stop", key=f"home_stop_{run.id}"):
            lab_ui.db().stop_run(run.id)
            lab_ui.refresh()
            st.rerun()
        if build:
            st.progress(build.fraction, text=build.text)
        else:
            step = int(df.step.max()) if not df.empty else int(run.step)
            done, eta = progress(step, int(run.max_steps), df["time/step_s"].tolist())
            status = format_eta(eta) if run.status == "running" else run.status
            st.progress(done, text=f"step {step} / {run.max_steps} · {status}")
        if run.message and run.status in ("failed", "stopped", "lost"):
            st.caption(run.message[-300:])
        if not df.empty:
            st.plotly_chart(
                charts.metric_lines(df, ["reward/mean", "boundary/informative_share"], "Key curves"),
                key=f"home_curve_{run.id}",
            )


@st.fragment(run_every=lab_ui.LIVE_S)
def runs_panel() -> None:
    table = lab_ui.all_runs()
    if table.empty:
        st.info("No runs yet.")
        st.page_link(LAUNCH, label="Launch a run", icon=":material/rocket_launch:")
        return
    counts = table.status.value_counts()
    for col, s in zip(st.columns(4), ["running", "queued", "finished", "failed"], strict=True):
        col.metric(s.capitalize(), int(counts.get(s, 0)))
    for _, run in table.head(12).iterrows():
        run_card(SimpleNamespace(**run.to_dict()))


def home() -> None:
    st.title("RODS Lab")
    st.caption(
        "Reward-driven online data synthesis for multi-turn tool-use agents: launch GRPO runs, watch the "
        "capability boundary move, curate synthesized tasks, export what was learned."
    )
    runs_panel()


# Material icons ship with Streamlit; emoji need a system font that servers often lack.
LAUNCH = st.Page("pages/1_Launch.py", title="Launch", icon=":material/rocket_launch:", url_path="Launch")
st.navigation(
    [
        st.Page(home, title="Home", icon=":material/home:", default=True),
        LAUNCH,
        *(
            st.Page(f"pages/{f}.py", title=f.split("_", 1)[1], icon=f":material/{i}:", url_path=f.split("_", 1)[1])
            for f, i in [
                ("2_Boundary", "scatter_plot"),
                ("3_Review", "rule"),
                ("4_Buffer", "inventory_2"),
                ("5_Seeds", "eco"),
                ("6_Compare", "compare_arrows"),
            ]
        ),
    ]
).run()
