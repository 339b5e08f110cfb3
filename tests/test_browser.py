"""The newcomer's first quarter hour, end to end in a real browser (Playwright + Debian's chromium, headless):
serve the app, launch the default demo config with its static twin from the Launch page, and read Home at
every phase (the model build, the twin's wait for it, start-up, both runs training, both stopped from Home): its
counters sum to the cards shown and no card says stale. Then Boundary (open on the rods run by default),
Review (approve every waiting variant in one batch and Fix & Accept one; the trainer applies each), Compare
(per-step curves smoothed), Buffer (export the active pool), Seeds (import it back), then Stop on Home.

The runs are demo-cpu as a newcomer launches them: method rods on the warm-started demo model
(models/tiny-demo). On a clean clone the model is missing and the first run builds it (`make
test-browser-demo`, in .ci/run) while its twin waits; where it exists, the build and wait phases are skipped
and said so. Only the runs' length, the rollouts per task and the evaluation are cut down; variants are
review-gated. Screenshots go to bench/results/screenshots/ (home-build, home-wait, home-starting, home-running,
home-stopped, compare-smoothed, ...); with RODS_SCREENSHOTS=docs/img (`make screenshots`) the README's
pictures of Home with the live run and of Boundary are taken too.
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
    picked,
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


def opens_on(pg, picker: str, run_id: str) -> None:
    """The page's run picker shows `run_id` once the page has drawn it (a picker read before then is empty)."""
    wait(lambda: run_id in picked(pg, picker), 60, f"{picker} to show {run_id}", every=1)


def test_launch_watch_review_export_import(served, page):
    try:
        journey(served, page)
    except Exception:
        shot(page, "failed-last")
        raise


# Longer than the journey takes on a slow machine, so the rods run is training when the reviewer decides (a
# decision made after a run's last step waits for a resume); the journey stops both runs from Home at its end.
STEPS = 400
BUILD_S = 1500  # the demo model's build on 2 loaded cores (~5 min quiet, more loaded), with room


def home_says(pg, url: str, name: str) -> dict[str, int]:
    """Home as it is now: its counters (by label) sum to the run cards shown and no card says stale; a
    screenshot `name`. Returns the counters."""
    open_page(pg, url, "RODS Lab")
    cards = pg.locator('[class*="st-key-home_card_"]')
    cards.first.wait_for()
    pg.wait_for_timeout(1000)  # the fragment draws every card
    metrics = pg.get_by_test_id("stMetric")
    counts = {}
    for i in range(metrics.count()):
        label = metrics.nth(i).get_by_test_id("stMetricLabel").inner_text().strip()
        counts[label] = int(metrics.nth(i).get_by_test_id("stMetricValue").inner_text())
    texts = [cards.nth(i).inner_text() for i in range(cards.count())]
    assert sum(counts.values()) == len(texts), (name, counts, texts)
    assert not any("stale" in t for t in texts), (name, texts)
    shot(pg, name)
    return counts


def counted(counts: dict[str, int], state: str) -> int:
    """The counter whose label ends with the state's label (labels carry an icon before the word)."""
    return sum(n for label, n in counts.items() if label.endswith(state))


def phase_of(run_dir: Path) -> str | None:
    from storage.build_progress import BuildProgressError, read_build_progress

    try:
        p = read_build_progress(run_dir)
    except BuildProgressError:
        return None
    return p.phase if p else None


def phases(db, runs, dirs) -> list:
    """The runs' build phases, sorted; an AssertionError with its log's tail as soon as one run failed or its
    process is gone, so the journey stops then instead of waiting out a phase that will not come."""
    from rods_lab.status import dead_run_message, run_status

    for r in runs:
        if run_status(db, r.id) in ("failed", "lost"):
            raise AssertionError(f"run {r.id} {run_status(db, r.id)}: {dead_run_message(r)}")
    return sorted(map(phase_of, dirs), key=str)


def journey(served, page) -> None:
    from app_helpers import awaiting_review
    from playwright.sync_api import expect

    from storage.control import ControlDB
    from storage.reader import RunReader

    url, ws, runs = served
    db = ControlDB(ws / "control.sqlite")
    pg = page
    must_build = not (DEMO_MODEL / "config.json").exists()

    # Launch the default config and its static twin from the Launch page.
    open_page(pg, f"{url}/Launch", "Launch a run")
    # demo-cpu is the default config, rods its method and models/tiny-demo its model: only cut the runs down.
    pg.locator(key("launch_name")).locator("input").fill("browser")
    pg.locator(key("launch_review")).get_by_text("gated").click()
    pg.locator(key("launch_steps")).locator("input").fill(str(STEPS))
    pg.locator(key("launch_gens")).locator("input").fill("4")
    pg.locator(key("launch_pair")).get_by_text("Also launch a static twin").click()
    pg.locator(key("launch_more")).locator("textarea").fill(
        "\n".join(["grpo.save_steps=4", "eval.every=7", "eval.limit=4", "synthesis.parents_per_step=3"])
    )
    pg.get_by_role("button", name="Launch", exact=True).click()  # not "Help for Also launch a static twin"
    pg.get_by_text("runs keep going if you close the app").wait_for()
    by_method = {r.method: r for r in db.list_runs()}
    run, twin = by_method["rods"], by_method["static"]
    run_dir = Path(run.out_dir)
    cfg = run.config_dict()
    model = Path(cfg["model"]["path"])  # resolved by the app: models/ may be a link
    assert (cfg["method"], cfg["buffer"]["review"], model) == ("rods", "gated", DEMO_MODEL.resolve())
    dirs = [run_dir, Path(twin.out_dir)]

    # Home at each phase before the first step: one run builds the model, its twin waits for that build.
    if must_build:
        wait(lambda: phases(db, [run, twin], dirs) in (["sft", "waiting"], ["variants", "waiting"]) or None,
             BUILD_S, "one run building the model and the other waiting for it", every=2)  # fmt: skip
        counts = home_says(pg, url, "home-build")
        assert counted(counts, "Building") == 1 and counted(counts, "Waiting for a build") == 1, counts
        wait(lambda: "sft" in phases(db, [run, twin], dirs) or None, BUILD_S, "the warm start's SFT", every=2)
        counts = home_says(pg, url, "home-wait")
        assert counted(counts, "Building") == 1 and counted(counts, "Waiting for a build") == 1, counts
    else:
        print(f"{DEMO_MODEL} exists: the build and wait phases are not part of this journey")
    wait(lambda: any(phase_of(d) in (None, "done") and RunReader(d).latest_step() is None
                     and db.get_run(r.id).status == "running" for d, r in zip(dirs, (run, twin), strict=True)) or None,
         BUILD_S, "a run starting (its model there, no step yet)", every=1)  # fmt: skip
    home_says(pg, url, "home-starting")  # may already have moved on: what matters is no stale and the sum
    wait(lambda: all(RunReader(d).latest_step() for d in dirs) or None, 600, "both runs' first step", every=2)
    # Home reads the store through caches that live one refresh (ui.LIVE_S): a run's first step shows within it
    from rods_lab.ui import LIVE_S

    def running_on_home():
        counts = home_says(pg, url, "home-running")
        return counts if counted(counts, "Running") >= 1 else None

    wait(running_on_home, 3 * LIVE_S, "Home counting a run as running after its first step", every=5)
    readme_shot(pg, "home")
    shot(pg, "1-home-running")

    # The boundary chart follows the run; the page opens on the rods run, not its newer static twin.
    open_page(pg, f"{url}/Boundary", "Capability boundary")
    opens_on(pg, "boundary_run", run.id)
    title = pg.locator(".gtitle").filter(has_text="Tasks at step").first
    title.wait_for(timeout=240_000)
    first = title.text_content()
    wait(lambda: title.text_content() != first, 240, "the boundary chart to move to a later step", every=2)
    shot(pg, "2-boundary")
    readme_shot(pg, "boundary")

    # Fix & Accept the variant in focus, then approve every waiting variant in one batch. The edit goes first and
    # on a variant awaiting review, which stays so until a decision moves it: an edit of an approved variant would
    # race its probe (probed out to retired while the edit waits, then refused once P_max is reached).
    wait(
        lambda: len(awaiting_review(run_dir)) >= 2 or None,
        300,
        "two variants awaiting review",
        every=3,
    )
    open_page(pg, f"{url}/Review", "Synthesis review")
    opens_on(pg, "review_run", run.id)
    set_reviewer(pg, "browser")
    pg.locator(key("review_view")).get_by_text("awaiting_review", exact=True).click()  # a gated run opens on it
    edit = fix_and_accept_focused(pg, " Thanks a lot!")
    approve_all_matching(pg)
    approved = {d.task_id for d in db.decisions(run.id) if d.action == "approve"}
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
    # the batch may hold the edited variant (the table it was sent from was read before the edit was applied):
    # its approval comes after the edit, which retired it, so the trainer refuses it
    assert {(d.task_id, d.action, d.status) for d in decided} == {
        *((t, "approve", "applied") for t in approved - {edit}),
        *([(edit, "approve", "refused")] if edit in approved else []),
        (edit, "edit", "applied"),
    }, decided
    assert approved - {edit}, "the batch approved no variant beside the edited one"

    def moves() -> set[str]:  # the step's events reach the store when the step ends; reasons are "code: detail"
        df = RunReader(run_dir).query("SELECT reason FROM buffer WHERE reason LIKE 'decision/%'")
        return {r.split(":")[0] for r in df.reason}

    wait(lambda: {"decision/approve", "decision/edit"} <= moves(), 300, "the decisions' buffer events", every=3)

    # Compare: the pair side by side, per-step curves smoothed by default.
    open_page(pg, f"{url}/Compare", "Compare runs")
    assert pg.locator(key("compare_smooth")).locator("input").is_checked()
    pg.locator(".gtitle").filter(has_text="Share of informative groups").first.wait_for(timeout=120_000)
    shot(pg, "compare-smoothed")

    # Export the active pool, then import it back as seeds.
    open_page(pg, f"{url}/Buffer", "Replay buffer")
    opens_on(pg, "buffer_run", run.id)
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

    # Stop both runs from Home (a launcher's button on each card): each records who stopped it, ends at its next
    # step boundary after a checkpoint, and Home counts it stopped.
    from rods_lab.processes import process_alive

    open_page(pg, url, "RODS Lab")
    for r in (run, twin):
        pg.locator(key(f"home_stop_{r.id}")).locator("button").click()
        wait(lambda r=r: db.get_run(r.id).status == "stopped" or None, 60, f"{r.id} to be marked stopped", every=1)
    wait(lambda: not any(process_alive(r.pid, r.proc_start) for r in map(db.get_run, (run.id, twin.id))) or None,
         300, "both runs' processes to end", every=3)  # fmt: skip
    counts = home_says(pg, url, "home-stopped")
    assert counted(counts, "Stopped") == 2, counts
