"""The Review page in a real browser (Playwright + Debian's chromium) over a live run, fast enough for CI.

The run is real: an untrained tiny model (built in a second) trained by `rods train` with uniform synthesis
of ~48 variants a step, review-gated, so a hundred variants wait for review within a few steps. In the browser:
a bulk approve of every waiting variant (>= 100) sent as one batch, keyboard navigation of the focus view,
a Fix & Accept, and the audit trail after the trainer's step, downloaded as CSV. The store must show each
decision applied exactly once, the batch at one step boundary. Screenshots: bench/results/screenshots/review-*.png
(and, with RODS_SCREENSHOTS=docs/img, the README's picture of the queue);
the decision-to-applied latency in steps: bench/results/review_latency.json.
"""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from app_helpers import ROOT, kill_group, smoke_config
from browser_helpers import (
    SHOTS,
    approve_all_matching,
    chromium_page,
    end_runs,
    fix_and_accept_focused,
    focus_moves,
    focused,
    key,
    need_chromium,
    open_page,
    readme_shot,
    scroll_to,
    serve,
    set_reviewer,
    shot,
    wait,
)

pytestmark = pytest.mark.browser
RUN_ID = "live_review"


@pytest.fixture(scope="module")
def live(tmp_path_factory, tiny_model_dir):
    """(url, workspace, run folder): the app served beside a gated run that keeps training until the end."""
    need_chromium()
    base = tmp_path_factory.mktemp("browser_review")
    ws, runs = base / "ws", base / "runs"
    model = ws / "models" / "tiny"
    shutil.copytree(tiny_model_dir, model)
    cfg = smoke_config(
        base,
        model,
        **{
            "name": "live",
            "method": "uniform_synth",
            "grpo.max_steps": 400,  # ended by the test once it has seen what it needs
            "grpo.save_steps": 1000,
            "eval.every": 0,
            "eval.limit": 1,
            "buffer.review": "gated",
            "buffer.probe_slots": 1,
            "buffer.p_max": 240,
            "buffer.max_probe_wait": 1000,
            "synthesis.parents_per_step": 8,
            "synthesis.n_per_parent": 8,
        },
    )
    (base / "live.yaml").write_text(yaml.safe_dump(cfg))
    log = open(base / "train.log", "wb")  # noqa: SIM115 - closed below
    trainer = subprocess.Popen(
        [sys.executable, "-m", "rods_lab.cli", "train", "--config", str(base / "live.yaml"), "--run-id", RUN_ID],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        with serve(ws, runs, base / "server.log") as url:
            yield url, ws, runs / RUN_ID
    finally:
        kill_group(trainer.pid)
        log.close()
        end_runs(ws)


def awaiting(run_dir: Path) -> int:
    from app_helpers import awaiting_review

    try:
        return len(awaiting_review(run_dir))
    except Exception:  # noqa: BLE001 - the run folder is still being created
        return 0


def test_bulk_approve_keyboard_fix_and_accept_and_audit_in_a_live_run(live):
    with chromium_page() as pg:
        try:
            journey(live, pg)
        except Exception:
            shot(pg, "review-failed")
            raise


def journey(live, pg) -> None:
    from storage.control import ControlDB
    from storage.reader import RunReader

    url, ws, run_dir = live
    db = ControlDB(ws / "control.sqlite")
    wait(lambda: awaiting(run_dir) >= 100, 240, "100 variants awaiting review", every=2)

    # A bulk approve of every waiting variant: one batch.
    open_page(pg, f"{url}/Review", "Synthesis review")
    set_reviewer(pg, "ci-bot")
    shot(pg, "review-1-queue")
    readme_shot(pg, "review", top=pg.locator(key("review_reviewer")))
    approve_all_matching(pg)
    batch = db.decisions(RUN_ID)
    assert len(batch) >= 100 and len({d.batch_id for d in batch}) == 1
    assert {(d.action, d.author) for d in batch} == {("approve", "ci-bot")}
    shot(pg, "review-2-bulk")

    # The focus view: next and previous from the keyboard, then Fix & Accept (E opens the editor).
    pg.locator(key("review_view")).get_by_text("all", exact=True).click()
    pg.wait_for_timeout(1000)
    first = focused(pg)
    second = focus_moves(pg, "n", first)
    assert second != first
    assert focus_moves(pg, "p", second) == first
    shot(pg, "review-3-focus")
    edited = fix_and_accept_focused(pg, " Thanks a lot!")
    shot(pg, "review-4-fix")
    decisions = db.decisions(RUN_ID)
    assert len(decisions) == len(batch) + 1 and (decisions[-1].task_id, decisions[-1].action) == (edited, "edit")

    # The trainer applies each decision exactly once; the batch at one step boundary.
    def all_decided():
        ds = db.decisions(RUN_ID)
        return ds if all(d.status in ("applied", "refused") for d in ds) else None

    done = wait(all_decided, 120, "the trainer to apply every decision")
    assert [d.status for d in done] == ["applied"] * len(done), [
        (d.task_id, d.reason) for d in done if d.status != "applied"
    ]
    assert len({d.applied_step for d in done[:-1]}) == 1
    reader = RunReader(run_dir)

    def events():
        found = reader.query("SELECT decision_id FROM decision_applied").decision_id.tolist()
        return found if len(found) >= len(done) else None

    applied = wait(events, 60, "the decisions' events")
    assert sorted(applied) == [d.id for d in done]  # one event per decision: exactly once

    def moves():  # a decision's pool moves come out of the buffer's next observe(): a step later
        found = reader.query("SELECT task_id, reason FROM buffer WHERE reason LIKE 'decision/%'")
        return found if found.reason.str.startswith("decision/edit").any() else None

    found = wait(moves, 60, "the decisions' pool moves")
    approved = found[found.reason.str.startswith("decision/approve")].task_id
    assert sorted(approved) == sorted(d.task_id for d in batch)
    assert (found[found.reason.str.startswith("decision/edit")].task_id == edited).sum() == 1  # retired once

    # The audit trail after the step, downloaded; the reviewer's name is remembered by this browser.
    open_page(pg, f"{url}/Review", "Synthesis review")
    from playwright.sync_api import expect

    expect(pg.locator(key("review_reviewer")).locator("input")).to_have_value("ci-bot", timeout=20_000)
    with pg.expect_download() as dl:
        pg.locator(key("review_audit_csv")).locator("button").click()
    path = ws / "audit.csv"
    dl.value.save_as(path)
    rows = list(csv.DictReader(path.open()))
    assert [int(r["id"]) for r in rows] == [d.id for d in done]
    assert {(r["reviewer"], r["outcome"]) for r in rows} == {("ci-bot", "applied")}
    assert all(r["applied_step"] for r in rows)
    scroll_to(pg.get_by_role("heading", name="Audit trail"))
    shot(pg, "review-5-audit")

    latency = [int(r["latency_steps"]) for r in rows]
    SHOTS.parent.joinpath("review_latency.json").write_text(
        json.dumps(
            {
                "decisions": len(rows),
                "seen_step": sorted({int(r["seen_step"]) for r in rows}),
                "applied_step": sorted({int(r["applied_step"]) for r in rows}),
                "latency_steps": {str(k): latency.count(k) for k in sorted(set(latency))},
            }
        )
    )
    assert min(latency) >= 1  # never applied at a step the reviewer had already seen finish
