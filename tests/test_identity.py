"""Who acts: with login configured every page waits for it, the Review page decides under the identity
provider's email with no typed reviewer, roles are enforced by the services (decide, comment, launch, stop,
seed edits) with a refusal that names who may, and the app refuses to serve beyond 127.0.0.1 without login."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from app_helpers import ROOT, lab_env

from bench.review_bench import build_review_run
from rods_core.config import load_config
from rods_lab import catalog_edits, launch, review
from rods_lab.identity import Refused, RolePolicy, actor_of, auth_missing, lab_serving_problem, local
from rods_lab.paths import AppPaths
from storage.control import ControlDB

AUTH = {
    "redirect_uri": "http://lab.example/oauth2callback",
    "cookie_secret": "5f0c2b9e8d7a41c3b6e2f19a0d4c7e8b3a6f1d2c9e0b7a4f",
    "client_id": "rods",
    "client_secret": "s3cret",
    "server_metadata_url": "http://127.0.0.1:9400/.well-known/openid-configuration",
}
ROLES = {"rods": {"roles": {"reviewers": ["Ana@Lab.example"], "launchers": ["lin@lab.example"]}}}
POLICY = RolePolicy.from_settings(ROLES)
ANA, LIN, RO = (actor_of(e, POLICY) for e in ("ana@lab.example", "lin@lab.example", "ro@lab.example"))


def test_auth_settings_name_what_is_missing():
    assert auth_missing({"auth": AUTH}) == []
    assert auth_missing({}) == [f"auth.{k}" for k in ("redirect_uri", "cookie_secret", *list(AUTH)[2:])]
    provider = {k: v for k, v in AUTH.items() if k in ("redirect_uri", "cookie_secret")}
    provider["lab"] = {"client_id": "rods", "client_secret": "s", "server_metadata_url": "http://idp/"}
    assert auth_missing({"auth": provider}) == []
    del provider["lab"]["client_secret"]
    assert auth_missing({"auth": provider}) == ["auth.lab.client_secret"]


def test_roles_come_from_the_allowlist_and_a_refusal_names_who_may():
    assert (ANA.roles, LIN.roles, RO.roles) == ({"reviewer"}, {"launcher"}, frozenset())
    assert local("").roles == {"reviewer", "launcher"}  # no login: one person on this machine
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['admins'\]"):
        RolePolicy.from_settings({"rods": {"roles": {"admins": []}}})


def test_the_lab_host_is_refused_without_login(tmp_path):
    secrets = tmp_path / "secrets.toml"
    assert lab_serving_problem("127.0.0.1", secrets) is None
    problem = lab_serving_problem("0.0.0.0", secrets)
    assert str(secrets) in problem and "auth.redirect_uri" in problem and "auth.server_metadata_url" in problem
    secrets.write_text("[auth]\n" + "".join(f'{k} = "{v}"\n' for k, v in AUTH.items()))
    assert lab_serving_problem("0.0.0.0", secrets) is None
    # the command the Makefile's app-lab runs, in a folder with no secrets file: exit 2 with the reason
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-m", "rods_lab.identity", "0.0.0.0"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert out.returncode == 2 and ".streamlit/secrets.toml lacks auth.redirect_uri" in out.stderr


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """(workspace, runs folder, run id, store): a gated run of 12 variants the pages read."""
    base = tmp_path_factory.mktemp("lab")
    ws, runs = base / "ws", base / "runs"
    with lab_env(ws, runs):
        build_review_run(ws, runs, "gated", 12)
        yield ws, runs, "gated", ControlDB(ws / "control.sqlite")


def test_the_services_refuse_whoever_lacks_the_role(lab, tmp_path):
    ws, runs, run_id, db = lab
    with pytest.raises(Refused, match=r"ro@lab.example may not decide on tasks: only reviewers may \(ana@lab"):
        review.decide(db, run_id, [("t", "approve", None)], RO)
    with pytest.raises(Refused, match="only reviewers may"):
        review.comment(db, run_id, "t", LIN, "hm")
    with pytest.raises(Refused, match=r"only launchers may \(lin@lab.example\)"):
        launch.stop_run(db, run_id, ANA)
    paths = AppPaths.from_env()
    cfg = load_config(ROOT / "configs" / "demo-cpu.yaml")
    with pytest.raises(Refused, match="may not launch runs"):
        launch.launch_run(cfg, paths, actor=RO)
    with pytest.raises(Refused, match="may not launch runs"):
        launch.launch_pair(cfg, paths, actor=ANA)
    with pytest.raises(Refused, match="may not edit the seed catalog"):
        catalog_edits.set_enabled(db, ["x"], False, LIN)
    assert db.decisions(run_id) == [] and db.comments(run_id) == []
    (d,) = review.decide(db, run_id, [("t", "reject", None)], ANA, "no", 1)
    assert d.author == "ana@lab.example"
    db.create_run("r_stop", str(tmp_path))
    assert launch.stop_run(db, "r_stop", LIN) is False
    assert (db.get_run("r_stop").stopped_by, db.get_run("r_stop").message) == (
        "lin@lab.example",
        "stopped by lin@lab.example",
    )


def app_test(path: str, user: dict | None, run_id: str | None = None):
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    st.cache_data.clear()
    st.cache_resource.clear()
    at = AppTest.from_file(str(ROOT / path), default_timeout=120)
    at.secrets.update({"auth": dict(AUTH), **ROLES})
    at.user = user if user is not None else {"is_logged_in": False}
    if run_id:
        at.session_state["lab_run"] = run_id
    return at.run()


@pytest.mark.parametrize("page", ["app.py", "pages/3_Review.py", "pages/1_Launch.py", "pages/5_Seeds.py"])
def test_every_page_waits_for_login(lab, page):
    at = app_test(page, None)
    assert not at.exception
    assert [b.label for b in at.button] == ["Log in"] and not at.text_input and not at.dataframe


def test_a_reviewer_decides_under_her_email_with_no_typed_name(lab):
    ws, runs, run_id, db = lab
    at = app_test(
        "pages/3_Review.py", {"is_logged_in": True, "email": "ana@lab.example", "email_verified": True}, run_id
    )
    assert not at.exception
    assert "review_reviewer" not in [t.key for t in at.text_input]  # no free-text reviewer with login on
    at.checkbox(key="review_all").check().run()
    at.button(key="review_bulk_approve").click().run()
    assert not at.exception
    approved = [d for d in db.decisions(run_id) if d.action == "approve"]
    assert len(approved) == 12 and {d.author for d in approved} == {"ana@lab.example"}
    assert db.verify_audit(run_id).ok


def test_a_read_only_user_sees_no_decision_controls(lab):
    ws, runs, run_id, db = lab
    at = app_test(
        "pages/3_Review.py", {"is_logged_in": True, "email": "ro@lab.example", "email_verified": True}, run_id
    )
    assert not at.exception
    keys = {b.key for b in at.button}
    assert not {k for k in keys if k and (k.startswith("review_bulk_") or k.startswith("review_focus_"))}, keys
    assert not any(k and k.startswith("review_add_comment_") for k in keys)
    assert any("Read-only: ro@lab.example" in i.value for i in at.info)
    home = app_test("app.py", {"is_logged_in": True, "email": "ro@lab.example", "email_verified": True})
    assert not home.exception and any("ro@lab.example" in c.value for c in home.sidebar.caption)


def test_make_app_stays_local_and_app_lab_checks_first():
    recipes = (ROOT / "Makefile").read_text().split("\n\n")
    (app,) = [r for r in recipes if r.startswith("app: ") or "\napp: " in r]
    (lab,) = [r for r in recipes if "\napp-lab: " in r or r.startswith("app-lab: ")]
    assert "--server.address 127.0.0.1" in app
    check, serve = lab.split("app-lab: ")[1].splitlines()[1:3]
    assert check.strip() == "$(BIN)/python -m rods_lab.identity $(HOST) $(SECRETS)" and "streamlit run" in serve
