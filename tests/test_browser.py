"""End to end in a real browser (Playwright + Debian's chromium, headless): serve the app, launch a run from
the Launch page, watch the boundary chart update, approve one variant and edit another (the trainer applies
both), export the active pool and import it back as seeds. Screenshots go to bench/results/screenshots/.

The run is demo-cpu as a researcher launches it: method rods on the warm-started demo model
(models/tiny-demo, built by `make demo-model`, which `make test-browser` runs first), so the variants to
review are synthesized from the boundary tasks the detector found; only the run's length, the rollouts per
task and the evaluation are cut down so the test ends in minutes. Variants are review-gated.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser
ROOT = Path(__file__).resolve().parent.parent
SHOTS = ROOT / "bench" / "results" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
DEMO_MODEL = ROOT / "models" / "tiny-demo"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(predicate, timeout: float, what: str, every: float = 1.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(base url, workspace, runs folder) of an app served on 127.0.0.1."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} missing: apt-get install -y chromium")
    if not (DEMO_MODEL / "config.json").exists():
        pytest.skip(f"{DEMO_MODEL} missing: `make demo-model` builds it (`make test-browser` does)")
    base = tmp_path_factory.mktemp("browser")
    ws, runs = base / "ws", base / "runs"
    port = _free_port()
    env = {**os.environ, "RODS_WORKSPACE": str(ws), "RODS_RUNS": str(runs)}
    log = open(base / "server.log", "wb")  # noqa: SIM115 - closed with the server
    server = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        try:
            return urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).status == 200
        except OSError:
            return False

    try:
        _wait(healthy, 60, "the streamlit server")
        yield url, ws, runs
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=20)
        log.close()
        _end_runs(ws)


def _end_runs(ws: Path) -> None:
    """Runs launched by the served app live in their own sessions: end any still alive."""
    from storage.control import ControlDB, process_alive

    for run in ControlDB(ws / "control.sqlite").list_runs():
        if process_alive(run.pid, run.proc_start):
            os.killpg(run.pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def page(served):
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        pg = browser.new_page(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
        pg.set_default_timeout(60_000)
        yield pg
        browser.close()


def key(name: str) -> str:
    """CSS for the container Streamlit gives a widget with `key=name` (it turns other characters into '-')."""
    return f'[class~="st-key-{re.sub(r"[^a-zA-Z0-9_-]", "-", name)}"]'


def shot(pg, name: str) -> None:
    pg.wait_for_timeout(1500)  # let charts finish drawing
    pg.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def open_page(pg, url: str, title: str) -> None:
    pg.goto(url)
    try:
        pg.get_by_role("heading", name=title, exact=True).wait_for(timeout=120_000)
    except Exception:
        shot(pg, f"failed-{title.replace(' ', '-')}")
        raise


def item_of(pg, task_id: str):
    """The review item (an expander) of a staged variant."""
    return pg.locator("details").filter(has=pg.locator("summary", has_text=f"{task_id} · awaiting_review")).first


def expand(details) -> None:
    """Open an expander unless it is open already (clicking an open one would close it)."""
    details.wait_for()
    if details.get_attribute("open") is None:
        details.locator("summary").first.click()


def test_launch_watch_review_export_import(served, page):
    try:
        journey(served, page)
    except Exception:
        shot(page, "failed-last")
        raise


def journey(served, page) -> None:
    from rods_core import lab
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
    pg.get_by_role("button", name="Launch").click()
    pg.get_by_text("Launched run").wait_for()
    (run,) = db.list_runs()
    run_dir = Path(run.out_dir)
    cfg = run.config_dict()
    assert (cfg["method"], cfg["buffer"]["review"], Path(cfg["model"]["path"])) == ("rods", "gated", DEMO_MODEL)
    _wait(
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
    _wait(lambda: title.text_content() != first, 240, "the boundary chart to move to a later step", every=2)
    shot(pg, "2-boundary")

    # Approve one variant, edit another.
    queue = _wait(
        lambda: (
            [i for i in lab.review_queue(run_dir) if i.status == "awaiting_review"][:2]
            if len([i for i in lab.review_queue(run_dir) if i.status == "awaiting_review"]) >= 2
            else None
        ),
        300,
        "two variants awaiting review",
        every=3,
    )
    approve, edit = (i.task.id for i in queue)
    open_page(pg, f"{url}/Review", "Synthesis review")
    expand(item_of(pg, approve))  # with more than three items each sits in a collapsed expander
    pg.locator(key(f"review_approve_{approve}")).locator("button").click()
    pg.get_by_text(f"approve {approve}").first.wait_for()  # the page confirms the decision
    _wait(lambda: any(d.task_id == approve for d in db.decisions(run.id)), 60, "the approve decision")
    box = pg.locator(key(f"review_u_{edit}_0")).locator("textarea")
    expand(item_of(pg, edit))
    expand(pg.locator("details").filter(has=box).last)  # the innermost expander holding the editor is "Edit"
    box.fill(box.input_value() + " Thanks a lot!")
    pg.locator('[data-testid="stForm"]').filter(has=box).get_by_role("button").click()
    _wait(lambda: any(d.action == "edit" for d in db.decisions(run.id)), 60, "the edit decision")
    shot(pg, "3-review")
    decided = _wait(
        lambda: (
            [d for d in db.decisions(run.id) if d.status in ("applied", "refused")]
            if all(d.status in ("applied", "refused") for d in db.decisions(run.id))
            else None
        ),
        300,
        "the trainer to apply both decisions",
        every=3,
    )
    assert [(d.task_id, d.action, d.status) for d in decided] == [
        (approve, "approve", "applied"),
        (edit, "edit", "applied"),
    ], decided

    def moves() -> set[str]:  # the step's events reach the store when the step ends; reasons are "code: detail"
        df = RunReader(run_dir).query("SELECT reason FROM buffer WHERE reason LIKE 'decision/%'")
        return {r.split(":")[0] for r in df.reason}

    _wait(lambda: {"decision/approve", "decision/edit"} <= moves(), 300, "the decisions' buffer events", every=3)

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
    pg.locator(key("seeds_upload")).locator('input[type="file"]').set_input_files(str(exported))
    pg.locator(key("seeds_import")).locator("button").click()
    pg.get_by_text(f"Imported {len(records)} new").wait_for()
    assert {s.task_id for s in db.list_seeds()} == {r["id"] for r in records}
    pg.get_by_role("tab", name="Catalog").click()
    shot(pg, "5-seeds")

    open_page(pg, f"{url}/Compare", "Compare runs")
    shot(pg, "6-compare")
    open_page(pg, url, "RODS Lab")
    shot(pg, "0-home")
    pg.locator(key(f"home_stop_{run.id}")).locator("button").click()
    _wait(lambda: db.get_run(run.id).status == "stopped", 30, "the run to stop")
    _wait(
        lambda: not Path(f"/proc/{run.pid}").exists() or "Z" in Path(f"/proc/{run.pid}/stat").read_text().split()[2],
        300,
        "the trainer to exit at its step boundary",
        every=2,
    )
