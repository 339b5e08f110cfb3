"""Boundary, Review and Buffer open on the run that has what they show: the newest run whose method
synthesizes (not its newer static twin), then on the run the user picked, remembered for that user; a
finished run's Review table says it was read at the run's last step."""

from __future__ import annotations

import json
import shutil

import streamlit as st
from app_helpers import ROOT, RUN_ID
from streamlit.testing.v1 import AppTest

from rods_lab.paths import AppPaths
from rods_lab.prefs import read_user_prefs
from storage.control import ControlDB

PICKERS = {"pages/2_Boundary.py": "boundary_run", "pages/3_Review.py": "review_run", "pages/4_Buffer.py": "buffer_run"}
USER = "test@example.com"  # the signed-in user AppTest plays (st.user)


def fresh(page: str) -> AppTest:
    """A new browser session on the page: nothing picked in it yet."""
    st.cache_data.clear()
    return AppTest.from_file(str(ROOT / page), default_timeout=60).run()


def test_pages_open_on_the_newest_synthesizing_run_then_on_the_users_choice(app_env, tmp_path, monkeypatch):
    _, _, _, run_dir = app_env
    ws, runs = tmp_path / "ws", tmp_path / "runs"
    monkeypatch.setenv("RODS_WORKSPACE", str(ws))
    monkeypatch.setenv("RODS_RUNS", str(runs))
    db = ControlDB(ws / "control.sqlite")
    # the fixture's run (uniform synthesis, finished at step 3) whose pools last changed at step 1 ...
    shutil.copytree(run_dir, runs / RUN_ID, ignore=shutil.ignore_patterns("*.lock"))
    pools = json.loads((runs / RUN_ID / "pools.json").read_text())
    (runs / RUN_ID / "pools.json").write_text(json.dumps({**pools, "step": 1}))
    db.create_run(RUN_ID, runs / RUN_ID, {"grpo": {"max_steps": 3}}, "uniform_synth")
    db.update_run(RUN_ID, status="finished")
    # ... and its static twin, launched just after it (the newest run)
    (runs / "twin").mkdir()
    shutil.copy(run_dir / "config.yaml", runs / "twin" / "config.yaml")
    db.create_run("twin", runs / "twin", {"grpo": {"max_steps": 3}}, "static")
    db.update_run("twin", status="finished")

    for page, key in PICKERS.items():
        at = fresh(page)
        assert not at.exception and at.selectbox(key=key).value == RUN_ID, page
    review = fresh("pages/3_Review.py")
    assert any(c.value.startswith("Table read at step 3; the run is at step 3.") for c in review.caption)

    at = fresh("pages/4_Buffer.py")
    at.selectbox(key="buffer_run").select("twin").run()
    assert not at.exception
    assert read_user_prefs(AppPaths.from_env(), USER) == {"run": "twin"}
    for page, key in PICKERS.items():  # a later session of the same user opens on their choice
        assert fresh(page).selectbox(key=key).value == "twin", page
