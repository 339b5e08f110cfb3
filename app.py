"""RODS Lab — the entry point (navigation) and Home: the runs, their status, progress and ETA, key curves;
stop a run. Run: `make app`."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

import streamlit as st

from rods_lab import charts, identity, launch, ui, views
from rods_lab.pages import HOME, PAGES
from rods_lab.status import STATES, RunState, format_eta, progress

st.set_page_config(page_title="RODS Lab", page_icon=HOME.material, layout="wide")
SHOWN = 12  # run cards on Home, newest first; the counters count exactly these


@st.cache_data(ttl=ui.LIVE_S, show_spinner=False)
def curves(run_dir: str):
    return ui.reader(run_dir).query(
        'SELECT step, "reward/mean", "boundary/informative_share", "time/step_s" FROM step ORDER BY step'
    )


def run_card(run: SimpleNamespace, df, state: RunState, build: views.BuildView | None) -> None:
    with st.container(border=True, key=f"home_card_{run.id}"):
        head, stop = st.columns([5, 1])
        head.markdown(f"**{run.name}** · `{run.id}` · {run.method} · {state.icon} {state.word}")
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
            now = {"running": format_eta(eta), "starting": "loading the model and the trainer"}.get(state.state)
            st.progress(done, text=f"step {step} / {run.max_steps} · {now or state.word}")
        if run.message and state.state in ("failed", "stopped"):
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
    cards = []
    for _, row in table.head(SHOWN).iterrows():
        run = SimpleNamespace(**row.to_dict())
        df = curves(run.out_dir)
        cards.append((run, df, *views.run_view(run.out_dir, run.status, not df.empty)))
    counts = Counter(state.state for _, _, state, _ in cards)
    shown = [s for s in STATES if counts[s]]  # every state a shown card is in, and only those
    for col, s in zip(st.columns(max(len(shown), 4)), shown, strict=False):
        col.metric(f"{STATES[s][1]} {STATES[s][0]}", counts[s])
    if len(table) > SHOWN:
        st.caption(f"The {SHOWN} newest of {len(table)} runs (`rods runs list` lists all).")
    for card in cards:
        run_card(*card)


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
