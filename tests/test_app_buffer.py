"""The Buffer page over a real run's store: pool filter, a task's history, export of a pool as JSONL."""

from __future__ import annotations

import json

from app_helpers import RUN_ID, catch_downloads, page

from rods_lab import views


def test_buffer_filters_history_and_export(app_env, monkeypatch):
    ws, _, _, run_dir = app_env
    stored = catch_downloads(monkeypatch)
    at = page("pages/4_Buffer.py").run()
    assert not at.exception
    total = len(views.pool_table(run_dir))
    at.multiselect(key="buffer_pools").set_value(["staged"]).run()
    staged = len(views.snapshot(run_dir).tasks("staged"))
    assert any(m.value == f"{staged} of {total} tasks" for m in at.markdown)
    at.selectbox(key="buffer_task").select(at.selectbox(key="buffer_task").options[0]).run()
    assert not at.exception
    at.selectbox(key="buffer_export_pool").select("staged").run()
    lines = stored[f"{RUN_ID}-staged.jsonl"].decode().splitlines()
    assert not (ws / "exports").exists()  # offering a download writes nothing
    assert len(lines) == staged and {json.loads(ln)["pool"] for ln in lines} == {"staged"}
    assert "provenance" in json.loads(lines[0])
