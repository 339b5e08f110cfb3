"""End to end in a real browser (Playwright + Debian's chromium, headless): serve the app, launch a run from
the Launch page, watch the boundary chart update, approve every waiting variant in one batch and Fix & Accept
one (the trainer applies each), export the active pool and import it back as seeds. Screenshots go to
bench/results/screenshots/; with RODS_SCREENSHOTS=docs/img (`make screenshots`) the README's pictures of Home
with the live run and of Boundary are taken too.

The run is demo-cpu as a researcher launches it: method rods on the warm-started demo model
(models/tiny-demo, built by `make demo-model`, which `make test-browser-demo` runs first), so the variants to
review are synthesized from the boundary tasks the detector found; only the run's length, the rollouts per
task and the evaluation are cut down so the test ends in minutes. Variants are review-gated.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from browser_helpers import (
    ROOT,
    approve_all_matching,
    chromium_page,
    end_runs,
    fix_and_accept_focused,
    key,
    need_chromium,
    open_page,
    readme_shot,
    serve,
    set_reviewer,
    shot,
    wait,
)

pytestmark = pytest.mark.browser
DEMO_MODEL = ROOT / "models" / "tiny-demo"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(base url, workspace, runs folder) of an app served on 127.0.0.1."""
    need_chromium()
    if not (DEMO_MODEL / "config.json").exists():
        pytest.skip(f"{DEMO_MODEL} missing: `make demo-model` builds it (`make test-browser-demo` does)")
    base = tmp_path_factory.mktemp("browser")
    ws, runs = base / "ws", base / "runs"
    try:
        with serve(ws, runs, base / "server.log") as url:
            yield url, ws, runs
    finally:
        end_runs(ws)


@pytest.fixture(scope="module")
def page(served):
    with chromium_page() as pg:
        yield pg


def test_launch_watch_review_export_import(served, page):
    try:
        journey(served, page)
    except Exception:
        shot(page, "failed-last")
        raise


def journey(served, page) -> None:
    from playwright.sync_api import expect

    from rods_lab.views import review_queue
    from storage.control import ControlDB
    from storage.reader import RunReader

    url, ws, runs = served
    db = ControlDB(ws / "control.sqlite")
    pg = page

    # Launch a run from the Launch page.
    open_page(pg, f"{url}/Launch", "Launch a run")
    # demo-cpu is the default config, rods its method and models/tiny-demo its model: only cut the run down.
    pg.locator(key("launch_name")).locator("input").fill("browser")
    pg.locator(key("launch_review")).get_by_text("gated").click()
    pg.locator(key("launch_steps")).locator("input").fill("14")
    pg.locator(key("launch_gens")).locator("input").fill("4")
    pg.locator(key("launch_more")).locator("textarea").fill(
        "\n".join(["grpo.save_steps=4", "eval.every=7", "eval.limit=4", "synthesis.parents_per_step=3"])
    )
    pg.get_by_role("button", name="Launch", exact=True).click()  # not "Help for Also launch a static twin"
    pg.get_by_text("runs keep going if you close the app").wait_for()
    (run,) = db.list_runs()
    run_dir = Path(run.out_dir)
    cfg = run.config_dict()
    model = Path(cfg["model"]["path"])  # resolved by the app: models/ may be a link
    assert (cfg["method"], cfg["buffer"]["review"], model) == ("rods", "gated", DEMO_MODEL.resolve())
    wait(
        lambda: "step" in (run_dir / "train.log").read_text() if (run_dir / "train.log").exists() else False,
        240,
        "the first step in the log",
    )
    shot(pg, "1-launch")

    # The boundary chart follows the run.
    open_page(pg, f"{url}/Boundary", "Capability boundary")
    title = pg.locator(".gtitle").filter(has_text="Tasks at step").first
    title.wait_for(timeout=240_000)
    first = title.text_content()
    wait(lambda: title.text_content() != first, 240, "the boundary chart to move to a later step", every=2)
    shot(pg, "2-boundary")

    # Approve every waiting variant in one batch, then Fix & Accept the variant in focus.
    wait(
        lambda: sum(i.status == "awaiting_review" for i in review_queue(run_dir)) >= 2 or None,
        300,
        "two variants awaiting review",
        every=3,
    )
    open_page(pg, f"{url}/Review", "Synthesis review")
    set_reviewer(pg, "browser")
    approve_all_matching(pg)
    approved = {d.task_id for d in db.decisions(run.id)}
    pg.locator(key("review_view")).get_by_text("all", exact=True).click()
    edit = fix_and_accept_focused(pg, " Thanks a lot!")
    shot(pg, "3-review")
    decided = wait(
        lambda: (
            [d for d in db.decisions(run.id) if d.status in ("applied", "refused")]
            if all(d.status in ("applied", "refused") for d in db.decisions(run.id))
            else None
        ),
        300,
        "the trainer to apply the decisions",
        every=3,
    )
    assert {(d.task_id, d.action, d.status) for d in decided} == {
        *((t, "approve", "applied") for t in approved),
        (edit, "edit", "applied"),
    }, decided

    def moves() -> set[str]:  # the step's events reach the store when the step ends; reasons are "code: detail"
        df = RunReader(run_dir).query("SELECT reason FROM buffer WHERE reason LIKE 'decision/%'")
        return {r.split(":")[0] for r in df.reason}

    wait(lambda: {"decision/approve", "decision/edit"} <= moves(), 300, "the decisions' buffer events", every=3)

    # Export the active pool, then import it back as seeds.
    open_page(pg, f"{url}/Buffer", "Replay buffer")
    shot(pg, "4-buffer")
    with pg.expect_download() as dl:
        pg.locator(key("buffer_download")).locator("button").click()
    exported = ws / "downloaded-active.jsonl"
    dl.value.save_as(exported)
    records = [json.loads(ln) for ln in exported.read_text().splitlines()]
    assert records and {r["pool"] for r in records} <= {"active", "seeds"}
    open_page(pg, f"{url}/Seeds", "Seeds")
    pg.get_by_role("tab", name="Import").click()
    uploader = pg.locator(key("seeds_upload"))
    uploader.locator('input[type="file"]').set_input_files(str(exported))
    uploader.get_by_test_id("stFileChip").wait_for()
    expect(uploader.get_by_test_id("stFileChipIconSpinner")).to_have_count(0)  # uploaded, not uploading
    pg.wait_for_timeout(1000)  # the rerun the upload starts: a click during it can be lost
    pg.locator(key("seeds_import")).locator("button").click()
    pg.get_by_text(f"Imported {len(records)} new").wait_for()
    assert {s.task_id for s in db.list_seeds()} == {r["id"] for r in records}
    pg.get_by_role("tab", name="Catalog").click()
    shot(pg, "5-seeds")

    open_page(pg, f"{url}/Compare", "Compare runs")
    shot(pg, "6-compare")
    # Boundary again, late in the run: more steps in its charts, and a picker that reads the run's status anew
    open_page(pg, f"{url}/Boundary", "Capability boundary")
    pg.locator(".gtitle").filter(has_text="Tasks at step").first.wait_for(timeout=120_000)
    readme_shot(pg, "boundary")
    open_page(pg, url, "RODS Lab")
    shot(pg, "0-home")
    readme_shot(pg, "home")
    pg.locator(key(f"home_stop_{run.id}")).locator("button").click()
    wait(lambda: db.get_run(run.id).status == "stopped", 30, "the run to stop")
    wait(
        lambda: not Path(f"/proc/{run.pid}").exists() or "Z" in Path(f"/proc/{run.pid}/stat").read_text().split()[2],
        300,
        "the trainer to exit at its step boundary",
        every=2,
    )
