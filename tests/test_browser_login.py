"""Login as people use it: the app served with Streamlit's OIDC login against a mock identity provider on
127.0.0.1 (oidc-provider-mock), two users in two browsers (Debian's chromium through Playwright) over a gated
run. The reviewer's bulk approve is recorded under her email; the read-only user's Review page has no decision
controls, and the service behind them refuses her. Screenshots: bench/results/screenshots/login-reviewer.png
and login-readonly.png. In `.ci/run` (`make test-browser-login`), not in `make test`.
"""

from __future__ import annotations

import re
import tomllib

import pytest
from browser_helpers import CHROMIUM, SHOTS, VIEWPORT, approve_all_matching, free_port, key, need_chromium, serve, shot

from bench.review_bench import build_review_run
from rods_lab import review
from rods_lab.identity import Refused, RolePolicy, actor_of
from storage.control import ControlDB

pytestmark = pytest.mark.browser
RUN_ID = "gated_login"
REVIEWER, READER = "ana@lab.example", "ro@lab.example"
VARIANTS = 24


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """(app URL, workspace, secrets file): the app with login through the mock provider, over a gated run."""
    need_chromium()
    from oidc_provider_mock import User, run_server_in_thread

    base = tmp_path_factory.mktemp("browser_login")
    ws, runs = base / "ws", base / "runs"
    build_review_run(ws, runs, RUN_ID, VARIANTS)
    users = [User(sub=e, claims={"email": e, "email_verified": True}) for e in (REVIEWER, READER)]
    with run_server_in_thread(port=0, user_claims=users) as idp:
        port = free_port()
        secrets = base / "secrets.toml"
        secrets.write_text(
            "[auth]\n"
            f'redirect_uri = "http://127.0.0.1:{port}/oauth2callback"\n'
            'cookie_secret = "a-long-random-test-secret-0123456789abcdef"\n'
            'client_id = "rods-lab"\nclient_secret = "test-secret"\n'
            f'server_metadata_url = "http://127.0.0.1:{idp.server_port}/.well-known/openid-configuration"\n'
            f'[rods.roles]\nreviewers = ["{REVIEWER}"]\nlaunchers = []\n'
        )
        with serve(ws, runs, base / "app.log", port, ("--secrets.files", str(secrets))) as url:
            yield url, ws, secrets


def logged_in(browser, url: str, email: str):
    """A browser of its own (its own cookies) with `email` logged in through the provider's form."""
    pg = browser.new_context(viewport=VIEWPORT, accept_downloads=True).new_page()
    pg.set_default_timeout(60_000)
    pg.goto(url)
    pg.locator(key("identity_login")).locator("button").click()
    pg.get_by_role("button", name=email, exact=True).click()  # the provider's one-click user
    pg.get_by_text(f"Logged in as {email}").wait_for(timeout=120_000)
    pg.goto(f"{url}/Review")
    pg.get_by_role("heading", name="Synthesis review", exact=True).wait_for(timeout=120_000)
    return pg


def test_two_users_log_in_and_only_the_reviewer_decides(lab):
    from playwright.sync_api import sync_playwright

    url, ws, secrets = lab
    db = ControlDB(ws / "control.sqlite")
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        ana = logged_in(browser, url, REVIEWER)
        assert ana.locator(key("review_reviewer")).count() == 0  # no typed name with login on
        approve_all_matching(ana)
        ana.get_by_text(re.compile(rf"decision\(s\) approve by {re.escape(REVIEWER)}")).first.wait_for()
        shot(ana, "login-reviewer")

        ro = logged_in(browser, url, READER)
        ro.get_by_text(f"Read-only: {READER} is not a reviewer").wait_for()
        ro.get_by_role("heading", name="Audit trail").wait_for()
        for control in ("review_bulk_approve", "review_batch_comment", "review_focus_approve", "review_focus_edit"):
            assert ro.locator(key(control)).count() == 0, control
        shot(ro, "login-readonly")
        browser.close()

    decided = db.decisions(RUN_ID)
    assert len(decided) == VARIANTS and {d.author for d in decided} == {REVIEWER}
    assert db.verify_audit(RUN_ID).ok
    policy = RolePolicy.from_settings(tomllib.loads(secrets.read_text()))  # the roles the served app read
    with pytest.raises(Refused, match=rf"{READER} may not decide on tasks: only reviewers may \({REVIEWER}\)"):
        review.decide(db, RUN_ID, [(decided[0].task_id, "reject", None)], actor_of(READER, policy))
    assert len(db.decisions(RUN_ID)) == VARIANTS
