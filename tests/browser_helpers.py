"""What the browser tests share: serve the app on 127.0.0.1, drive Debian's chromium with Playwright, find
widgets by key, take screenshots, and the Review page's gestures (bulk approve, Fix & Accept)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHOTS = ROOT / "bench" / "results" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
VIEWPORT = {"width": 1400, "height": 1000}
# The README's pictures: 1280 wide, one screen tall, at most this many bytes (git keeps every version).
README_SHOT = {"width": 1280, "height": 800}
README_SHOT_MAX_BYTES = 200_000


def need_chromium() -> None:
    """Skip without chromium, unless RODS_BROWSER_REQUIRED is set (CI): then fail."""
    if not Path(CHROMIUM).exists():
        why = f"{CHROMIUM} missing: apt-get install -y chromium"
        if os.environ.get("RODS_BROWSER_REQUIRED"):
            pytest.fail(why)
        pytest.skip(why)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait(predicate, timeout: float, what: str, every: float = 1.0):
    """The predicate's first value other than None or False, polled until the timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value is not None and value is not False:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


@contextmanager
def serve(ws: Path, runs: Path, log_file: Path, port: int | None = None, args: tuple[str, ...] = ()) -> Iterator[str]:
    """The app served on `port` (a free one by default) with this workspace and runs folder, with more
    `streamlit run` options (`args`); yields its URL."""
    port = port or free_port()
    env = {**os.environ, "RODS_WORKSPACE": str(ws), "RODS_RUNS": str(runs)}
    log = open(log_file, "wb")  # noqa: SIM115 - closed with the server
    server = subprocess.Popen(
        [
            *(sys.executable, "-m", "streamlit", "run", "app.py"),
            *("--server.port", str(port), "--server.headless", "true", *args),
        ],
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
        wait(healthy, 60, "the streamlit server")
        yield url
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=20)
        log.close()


@contextmanager
def chromium_page():
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        pg = browser.new_page(viewport=VIEWPORT, accept_downloads=True)
        pg.set_default_timeout(60_000)
        yield pg
        browser.close()


def end_runs(ws: Path) -> None:
    """Runs launched for or by the served app live in their own sessions: end any still alive."""
    from rods_lab.processes import process_alive
    from storage.control import ControlDB

    for run in ControlDB(ws / "control.sqlite").list_runs():
        if process_alive(run.pid, run.proc_start):
            os.killpg(run.pid, signal.SIGKILL)


def key(name: str) -> str:
    """CSS for the container Streamlit gives a widget with `key=name` (it turns other characters into '-')."""
    return f'[class~="st-key-{re.sub(r"[^a-zA-Z0-9_-]", "-", name)}"]'


def shot(pg, name: str) -> None:
    pg.wait_for_timeout(1500)  # let charts finish drawing
    pg.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def readme_shot(pg, name: str, top=None) -> Path | None:
    """With RODS_SCREENSHOTS=<folder> (`make screenshots`: docs/img), the page as the README shows it:
    <folder>/<name>.png, one 1280 x 800 screen (scrolled so the locator `top` starts it, if given), reduced
    to a 256-colour palette when larger than README_SHOT_MAX_BYTES. Without the variable, nothing."""
    folder = os.environ.get("RODS_SCREENSHOTS")
    if not folder:
        return None
    from PIL import Image

    path = (ROOT / folder / f"{name}.png").resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    pg.set_viewport_size(README_SHOT)
    pg.wait_for_timeout(2500)  # the layout reflows and charts redraw at the new width
    if top is not None:
        top.evaluate("e => e.scrollIntoView({block: 'start'})")
        pg.wait_for_timeout(500)
    pg.screenshot(path=str(path))
    pg.set_viewport_size(VIEWPORT)
    if path.stat().st_size > README_SHOT_MAX_BYTES:
        Image.open(path).convert("RGB").quantize(256).save(path, optimize=True)
    return path


def open_page(pg, url: str, title: str) -> None:
    pg.goto(url)
    try:
        pg.get_by_role("heading", name=title, exact=True).wait_for(timeout=120_000)
    except Exception:
        shot(pg, f"failed-{title.replace(' ', '-')}")
        raise


def scroll_to(locator, tries: int = 5) -> None:
    """Scroll an element into view; a live page may rerender it meanwhile, so try again."""
    for i in range(tries):
        try:
            locator.scroll_into_view_if_needed(timeout=10_000)
            return
        except Exception:  # noqa: BLE001 - detached by a rerun: found afresh next time
            if i == tries - 1:
                raise


# ----- the Review page's gestures ----------------------------------------------------------------------
def set_reviewer(pg, name: str) -> None:
    box = pg.locator(key("review_reviewer")).locator("input")
    box.fill(name)
    box.press("Enter")
    pg.wait_for_timeout(500)


def approve_all_matching(pg) -> None:
    """Tick "Act on all N matching the filter" and press the bulk Approve button; waits for the batch."""
    pg.locator(key("review_all")).get_by_text("Act on all").click()
    pg.locator(key("review_bulk_approve")).locator("button").click()
    pg.get_by_text(re.compile(r"decision\(s\) approve by")).first.wait_for()


def picked(pg, name: str) -> str:
    """The value a selectbox with `key=name` shows: its input's value, else its last line of text (Streamlit
    draws the choice in either, by version and state)."""
    box = pg.locator(key(name))
    box.wait_for()
    field = box.locator("input")
    shown = field.first.input_value() if field.count() else ""
    lines = box.inner_text().strip().splitlines()
    return shown or (lines[-1].strip() if lines else "")


def focused(pg) -> str:
    """The task id shown in the focus view's variant selector."""
    return picked(pg, "review_focus")


def press(pg, shortcut: str) -> None:
    """A keyboard shortcut with no input focused (Streamlit ignores shortcuts typed into a field)."""
    pg.get_by_role("heading", name="Focus").click()
    pg.keyboard.press(shortcut)


def focus_moves(pg, shortcut: str, before: str) -> str:
    """Press a navigation shortcut and wait for the focus view to show another variant; returns it."""
    press(pg, shortcut)
    deadline = time.monotonic() + 20
    while (now := focused(pg)) == before and time.monotonic() < deadline:
        pg.wait_for_timeout(300)
    return now


def fix_and_accept_focused(pg, suffix: str) -> str:
    """Open the editor with E, append `suffix` to the first user turn, verify and send; returns the task id."""
    tid = focused(pg)
    press(pg, "e")
    box = pg.locator(key(f"review_u_{tid}_0")).locator("textarea")
    box.fill(box.input_value() + suffix)
    pg.get_by_role("button", name="Verify, fix & accept").click()
    pg.get_by_text(re.compile(r"decision\(s\) fix & accept by")).first.wait_for()
    return tid
