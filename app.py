"""RODS Lab — the entry point (navigation) and Home: the runs, their status, progress and ETA, key curves;
stop a run. Run: `make app`."""

from __future__ import annotations

from types import SimpleNamespace

import streamlit as st

from rods_lab import charts, identity, launch, ui, views
from rods_lab.pages import HOME, PAGES
from rods_lab.status import format_eta, progress

st.set_page_config(page_title="RODS Lab", page_icon=HOME.material, layout="wide")
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


@st.cache_data(ttl=ui.LIVE_S, show_spinner=False)
def curves(run_dir: str):
    return ui.reader(run_dir).query(
        'SELECT step, "reward/mean", "boundary/informative_share", "time/step_s" FROM step ORDER BY step'
    )


def run_card(run: SimpleNamespace) -> None:
    with st.container(border=True):
        df = curves(run.out_dir)
        build = views.build_view(run.out_dir, run.status, not df.empty)  # the model build, before the first step
        shown = build.status if build else run.status
        head, stop = st.columns([5, 1])
        head.markdown(f"**{run.name}** · `{run.id}` · {run.method} · {STATUS_ICON.get(shown, '')} {shown}")
        stoppable = run.status in ("queued", "running", "stale") and identity.current().may("launcher")
        if stoppable and stop.button("Stop", key=f"home_stop_{run.id}"):
            launch.stop_run(ui.db(), run.id, identity.current())  # launchers only; records who stopped it
            ui.refresh()
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


@st.fragment(run_every=ui.LIVE_S)
def runs_panel() -> None:
    ui.reconcile()  # the one write of a dead run's status, once per refresh
    table = ui.all_runs()
    if table.empty:
        st.info("No runs yet.")
        st.page_link(LAUNCH, label="Launch a run", icon=LAUNCH.icon)
        return
    counts = table.status.value_counts()
    for col, s in zip(st.columns(4), ["running", "queued", "finished", "failed"], strict=True):
        col.metric(s.capitalize(), int(counts.get(s, 0)))
    for _, run in table.head(12).iterrows():
        run_card(SimpleNamespace(**run.to_dict()))


def home() -> None:
    st.title(HOME.heading)
    st.caption(
        "Reward-driven online data synthesis for multi-turn tool-use agents: launch GRPO runs, watch the "
        "capability boundary move, curate synthesized tasks, export what was learned."
    )
    runs_panel()


identity.gate(account=True)  # with login configured, nothing shows until the user has logged in
PAGE = {p.title: st.Page(p.file, title=p.title, icon=p.material, url_path=p.title) for p in PAGES}
LAUNCH = PAGE["Launch"]
st.navigation([st.Page(home, title=HOME.title, icon=HOME.material, default=True), *PAGE.values()]).run()
