"""Streamlit glue shared by app.py and pages/: cached connections, cached queries, the run picker, the
page setup.

Connections are st.cache_resource; queries are st.cache_data with a short ttl so live pages see new
steps, and actions clear the caches they make stale.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import streamlit as st
from streamlit.runtime.pages_manager import PagesManager

from rods_core.benchmarks.protocols import Benchmark
from rods_core.benchmarks.registry import make_benchmark
from rods_lab import identity, views
from rods_lab.launch_policy import LaunchPolicy
from rods_lab.pages import PageSpec, page_of
from rods_lab.paths import AppPaths
from rods_lab.prefs import read_user_prefs, write_user_prefs
from rods_lab.status import reconcile_dead_runs
from storage.control import ControlDB, open_store
from storage.reader import RunReader

# Refresh period of live fragments and the ttl of live queries: watched pages take cores from a training run on
# the same machine, mostly the browser redrawing charts, so the period is what bounds their cost (skipping
# queries when nothing new was written does not). The figures per period: docs/measurements.md (app_watch_bench).
LIVE_S = 20


def paths() -> AppPaths:
    return AppPaths.from_env()


@st.cache_resource(show_spinner=False)
def _db(workspace: str, target: str) -> ControlDB:
    """`target` (the store `workspace` resolves to) is part of the cache key: a changed $RODS_CONTROL_DB
    opens the new store."""
    return open_store(workspace)


def launch_policy() -> LaunchPolicy:
    """The admin's rules for runs launched from the app (`[rods.launch]` in the secrets)."""
    return LaunchPolicy.from_settings(identity.app_settings())


def db() -> ControlDB:
    return _db(str(paths().workspace), str(paths().control_db))


@st.cache_resource(show_spinner=False)
def reader(run_dir: str) -> RunReader:
    return RunReader(run_dir)


@st.cache_data(ttl=LIVE_S, show_spinner=False)
def runs(workspace: str, target: str) -> pd.DataFrame:
    return views.runs_table(_db(workspace, target))


def all_runs() -> pd.DataFrame:
    return runs(str(paths().workspace), str(paths().control_db))


@st.cache_resource(show_spinner=False)
def _benchmark(run_dir: str) -> Benchmark:
    return views.run_benchmark(run_dir)


def benchmark(run_dir: str) -> Benchmark:
    """The run's benchmark (built once per run); a config.yaml that names none stops the page with the reason."""
    try:
        return _benchmark(run_dir)
    except views.RunBenchmarkError as e:
        st.error(str(e))
        st.stop()


@st.cache_resource(show_spinner=False)
def named_benchmark(name: str) -> Benchmark:
    """A benchmark by its registry name (the Seeds page's import door), built once."""
    return make_benchmark(name)


def structure_cache() -> str:
    """Where task signatures are kept between pages, runs and restarts."""
    return str(paths().workspace / "cache" / "structure.json")


def reconcile() -> None:
    """Store `failed` for runs that died before registering (once per refresh of Home, never from a cached
    query); the cached tables already show them failed, so nothing is cleared."""
    reconcile_dead_runs(db())


def refresh() -> None:
    """After an action: drop cached queries so the next render reads the new state."""
    st.cache_data.clear()


def user_id() -> str:
    """Who is using the app, for their remembered choices: the signed-in user's email, "" when nobody signs in
    (everyone then shares one set of choices per workspace)."""
    return str(st.user.get("email") or "")


def _chosen(key: str) -> None:
    """A run picked by hand: every page opens on it for the rest of the session, and for this user later."""
    st.session_state["lab_run"] = st.session_state[key]
    write_user_prefs(paths(), user_id(), run=st.session_state[key])


def pick_run(
    page: str,
    label: str = "Run",
    synthesizing: bool = False,
    empty: str = "No runs yet: start one on the **Launch** page.",
) -> SimpleNamespace | None:
    """A run selectbox; None (with the `empty` hint) when there are no runs. It opens on the run picked by hand
    (or launched) in this session, else the one this user picked last, else `views.default_run` (with
    `synthesizing`, the newest run whose method synthesizes)."""
    table = all_runs()
    if table.empty:
        st.info(empty)
        return None
    ids, by_id = table.id.tolist(), table.set_index("id")
    key = f"{page}_run"
    if st.session_state.get("lab_run") in ids:  # the run chosen (or launched) on any page
        st.session_state[key] = st.session_state["lab_run"]
    elif st.session_state.get(key) not in ids:
        remembered = read_user_prefs(paths(), user_id()).get("run")
        st.session_state[key] = views.default_run(table, remembered, synthesizing)
    run_id = st.selectbox(
        label,
        ids,
        key=key,
        format_func=lambda i: f"{i} · {by_id.method[i]} · {by_id.status[i]}",
        on_change=_chosen,
        args=(key,),
    )
    return SimpleNamespace(**by_id.loc[run_id].to_dict(), id=run_id)


def page_setup(script: str | Path) -> PageSpec:
    """The first call of every page (`page_setup(__file__)`): the app's navigation (even on a deep link),
    the login (rods_lab.identity), the page's title bar and heading from rods_lab.pages.PAGES; returns the
    page's entry.

    A private hook, kept on purpose (Streamlit 1.67). The public one, st.Page + st.navigation in app.py,
    is in place, but Streamlit leaves its legacy pages/ mode only once some session has run app.py ("as
    soon as any session executes st.navigation"): on a fresh server, a first visit straight to /Launch
    runs pages/1_Launch.py alone under the legacy navigation. No option or API changes that; the
    documented remedy, a page folder not named pages/, conflicts with the product's fixed layout
    (app.py + pages/). So the page leaves the legacy mode itself and reruns through app.py, which
    resolves the same URL. tests/test_app_navigation.py fails if this stops working.
    """
    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()
    spec = page_of(script)
    st.set_page_config(page_title=f"{spec.title} · RODS Lab", page_icon=spec.material, layout="wide")
    identity.gate()  # with login configured, a page shows only the login until the user has logged in
    st.title(spec.heading)
    return spec
