"""The lab app tried as a hostile lab member and as an outsider would: one test per way in that was found open
(docs/app.md, "What the app enforces"). Each names the attack; each failed before the app was closed by default.

Open by default (the app served to the network without login; a page elsewhere reaching it by DNS rebinding),
secrets out (path fields outside the workspace; the host's environment and an API key variable of the
launcher's choosing), the audit rewritten (downgraded, recomputed, truncated, deleted; columns outside the
chain), exports not neutralized (the table toolbar; NFKC and invisible characters), login trusting too much
(unverified email; a guessable cookie secret), and a read-only user writing (the review mode; Buffer's export;
Markdown comments).
"""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import typing
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest
from app_helpers import ROOT, lab_env
from browser_helpers import free_port, wait
from pydantic import BaseModel

from bench.review_bench import build_review_run
from rods_core.config import RunConfig, load_config
from rods_core.config.benchmark_entries import register_benchmark, unregister_benchmark
from rods_core.spreadsheet import safe_cell
from rods_lab import configs, launch, review
from rods_lab.identity import Refused, RolePolicy, actor_of, lab_serving_problem
from rods_lab.paths import AppPaths, OutsideWorkspace
from storage.control import ControlDB

SECRET = "5f0c2b9e8d7a41c3b6e2f19a0d4c7e8b3a6f1d2c9e0b7a4f"  # a cookie secret of 24 random bytes, hex
AUTH = {
    "redirect_uri": "http://lab.example/oauth2callback",
    "cookie_secret": SECRET,
    "client_id": "rods",
    "client_secret": "s3cret",
    "server_metadata_url": "http://127.0.0.1:9400/.well-known/openid-configuration",
}
ROLES = {"rods": {"roles": {"reviewers": ["ana@lab.example"], "launchers": ["lin@lab.example"]}}}
POLICY = RolePolicy.from_settings(ROLES)
DB_PASSWORD = "pa55-w0rd-of-the-lab-db"


# ----- open by default --------------------------------------------------------------------------------------
@contextmanager
def served(tmp_path: Path, address: str):
    """`streamlit run app.py --server.address ADDRESS` as a user types it (no secrets file); yields the port."""
    port = free_port()
    env = {**os.environ, "RODS_WORKSPACE": str(tmp_path / "ws"), "RODS_RUNS": str(tmp_path / "runs")}
    with open(tmp_path / "streamlit.log", "wb") as log:
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "streamlit",
                "run",
                "app.py",
                "--server.address",
                address,
                "--server.port",
                str(port),
            ],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

        def healthy() -> bool:
            try:
                return urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2).status == 200
            except OSError:
                return False

        try:
            wait(healthy, 60, "the streamlit server", every=0.3)
            yield port
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=20)


def session_elements(port: int, page: str = "") -> list[tuple[str, str]]:
    """What a browser's session is sent for `page`: (element type, its text) of every element, speaking
    Streamlit's own websocket protocol."""
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
    from websockets.sync.client import connect

    out = []
    with connect(f"ws://127.0.0.1:{port}/_stcore/stream", subprotocols=["streamlit"]) as ws:
        msg = BackMsg()
        msg.rerun_script.page_name = page
        ws.send(msg.SerializeToString())
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            fwd = ForwardMsg()
            fwd.ParseFromString(ws.recv(timeout=60))
            if fwd.WhichOneof("type") == "script_finished":
                if fwd.script_finished != ForwardMsg.FINISHED_EARLY_FOR_RERUN:
                    return out
                out = []  # a deep link reruns through app.py (rods_lab.ui.page_setup): what counts is that run
            if fwd.WhichOneof("type") == "delta" and fwd.delta.WhichOneof("type") == "new_element":
                el = fwd.delta.new_element
                kind = el.WhichOneof("type")
                out.append((kind, str(getattr(el, kind))))
    raise AssertionError(f"no script_finished from page {page!r} within 60 s")


def test_served_on_every_interface_without_login_it_shows_only_what_to_configure(tmp_path):
    with served(tmp_path, "0.0.0.0") as port:
        for page in ("", "Review", "Launch"):
            elements = session_elements(port, page)
            assert [kind for kind, _ in elements] == ["alert"], (page, elements)
            assert "RODS Lab is closed" in elements[0][1] and "auth.cookie_secret" in elements[0][1]


def upgrade_status(port: int, host: str) -> int:
    """The HTTP status of a websocket handshake that names `host` (Host and Origin), as a rebound page sends."""
    request = (
        f"GET /_stcore/stream HTTP/1.1\r\nHost: {host}:{port}\r\nOrigin: http://{host}:{port}\r\n"
        "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: streamlit\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(request.encode())
        return int(s.recv(1024).split()[1])


def test_a_page_that_rebinds_its_name_to_127_0_0_1_gets_no_websocket(tmp_path):
    with served(tmp_path, "127.0.0.1") as port:
        assert upgrade_status(port, "localhost") == 101
        assert upgrade_status(port, "rebind.attacker.example") != 101
    from rods_lab.identity import host_problem

    assert host_problem("rebind.attacker.example:8501") and not host_problem("127.0.0.1:8501")  # the app's own check


# ----- secrets out ------------------------------------------------------------------------------------------
def text_fields(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every field of the run config that holds text (str, list of str, a mapping), by its dotted name."""
    out = []
    for name, f in model.model_fields.items():
        args = typing.get_args(f.annotation) or (f.annotation,)
        subs = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
        for sub in subs:
            out += text_fields(sub, f"{prefix}{name}.")
        if not subs and ({str, dict} & {typing.get_origin(a) or a for a in args} or "str" in str(f.annotation)):
            out.append(prefix + name)
    return out


def test_every_path_field_of_a_launched_config_is_confined_to_the_workspace(tmp_path):
    fields = text_fields(RunConfig)
    unlisted = sorted(set(fields) - set(configs.PATH_FIELDS) - set(configs.TEXT_FIELDS))
    assert not unlisted, f"say whether these run config fields name files: {unlisted} (rods_lab/configs.py)"
    paths = AppPaths(tmp_path / "ws", tmp_path / "runs")
    base = load_config(ROOT / "configs" / "demo-cpu.yaml").model_dump()
    outside = {
        "eval.file": "/etc/passwd",
        "seeds.file": "../../etc/passwd",
        "synthesis.exclude": ["/etc/passwd"],
        "synthesis.prompts_dir": "/etc",
        "model.path": "/etc",
    }
    assert set(outside) == set(configs.PATH_FIELDS) - {"output_dir", "workspace"}
    needs = {"seeds.file": {"seeds.subset": "file"}, "eval.file": {"eval.split": "file"}}
    for field, value in outside.items():
        with pytest.raises(OutsideWorkspace, match="outside the workspace"):
            configs.build_config(base, {field: value, **needs.get(field, {})}, paths)
    cfg = configs.build_config(base, {"output_dir": "/etc", "workspace": "/"}, paths)
    assert (cfg.output_dir, cfg.workspace) == (str(paths.runs), str(paths.workspace))
    with pytest.raises(OutsideWorkspace, match="logging_dir"):
        configs.build_config(base, {"grpo.trainer_args": {"logging_dir": "/etc/cron.d"}}, paths)


class PathOptions(BaseModel):
    table: Path | None = None  # a file the benchmark reads: confined like the config's own file fields
    label: str = "x"  # text: left as it is


def test_a_benchmark_option_its_schema_types_as_a_path_is_confined_too(tmp_path):
    """A plug-in benchmark's own options are the config's too: a Path-typed one is refused outside the workspace
    and taken there when relative; a text one is not a path."""
    register_benchmark("paths_plugin", "rods_core.benchmarks.bfcl.benchmark:BfclMultiTurn",
                       task_type="rods_core.benchmarks.bfcl.tasks:Task", options_model=PathOptions)  # fmt: skip
    try:
        assert configs.path_options("paths_plugin") == ["table"] and configs.path_options("bfcl_multi_turn") == []
        paths = AppPaths(tmp_path / "ws", tmp_path / "runs")
        data = {"benchmark": "paths_plugin", "benchmark_options": {"table": "/etc/passwd", "label": "/etc"}}
        with pytest.raises(OutsideWorkspace, match="benchmark_options.table"):
            configs.confine_workspace_files(data, paths)
        data["benchmark_options"]["table"] = "tables/t.csv"
        configs.confine_workspace_files(data, paths)
        assert data["benchmark_options"] == {"table": str(paths.workspace.resolve() / "tables/t.csv"), "label": "/etc"}
    finally:
        unregister_benchmark("paths_plugin")


class Listener(http.server.BaseHTTPRequestHandler):
    """An endpoint that records every request it gets, headers and body, and answers a chat completion."""

    received: list[str] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode(errors="replace")
        Listener.received.append(str(self.headers) + body)
        answer = {
            "id": "x",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        }
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


CALL = """
import sys
from rods_core.config import load_config
from rods_core.benchmarks.bfcl.synth.llm import endpoint_of
print(endpoint_of(load_config(sys.argv[1]).synthesis).complete([{"role": "user", "content": "hi"}]))
"""


def test_a_launched_run_sends_no_host_secret_to_the_endpoint_it_names(tmp_path, monkeypatch):
    """The launcher's config names an endpoint she listens on and a host variable as its API key; the run is
    played as launched (its environment, its config file) up to the endpoint call."""
    server = http.server.HTTPServer(("127.0.0.1", 0), Listener)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    Listener.received = []
    monkeypatch.setenv("RODS_CONTROL_DB", f"postgresql+psycopg://lab:{DB_PASSWORD}@127.0.0.1:1/lab")
    monkeypatch.setenv("HOST_TOKEN", "tok-of-the-host-0123")
    monkeypatch.setenv("LAB_LLM_KEY", "the-key-the-admin-allows")
    started: list[dict] = []

    class Popen:  # the run's process as launched: its command and environment, started below by hand
        def __init__(self, cmd, **kw):
            started.append({"cmd": cmd, "env": kw["env"]})
            self.pid = os.getpid()

    paths = AppPaths(tmp_path / "ws", tmp_path / "runs")
    monkeypatch.setattr(AppPaths, "db", lambda self: ControlDB(tmp_path / "ws" / "control.sqlite"))
    url = f"http://127.0.0.1:{server.server_port}/v1"
    lin = actor_of("lin@lab.example", POLICY)
    kwargs = {}
    try:
        from rods_lab.launch_policy import LaunchPolicy

        kwargs = {"policy": LaunchPolicy(api_key_envs=frozenset({"LAB_LLM_KEY"}))}
    except ImportError:
        pass
    for i, key in enumerate(("RODS_CONTROL_DB", "HOST_TOKEN", "LAB_LLM_KEY")):
        cfg = load_config(ROOT / "configs" / "demo-cpu.yaml")
        cfg.synthesis.backend, cfg.synthesis.endpoint_url, cfg.synthesis.endpoint_model = "llm", url, "m"
        cfg.synthesis.api_key_env, cfg.output_dir = key, str(paths.runs)
        cfg.synthesis.llm_timeout_s, cfg.synthesis.llm_max_retries = 20.0, 0
        try:
            with monkeypatch.context() as m:
                m.setattr(launch.subprocess, "Popen", Popen)
                launch.launch_run(cfg, paths, f"leak_{i}", actor=lin, **kwargs)
        except ValueError as e:
            assert "api_key_env" in str(e) and key != "LAB_LLM_KEY"
    for run in started:
        config = run["cmd"][run["cmd"].index("--config") + 1]
        env = {**run["env"], "PYTHONPATH": str(ROOT)}
        out = subprocess.run([sys.executable, "-c", CALL, config], env=env, capture_output=True, text=True, cwd=ROOT)
        assert out.returncode == 0, out.stderr
        assert "HOST_TOKEN" not in run["env"]
    server.shutdown()
    heard = "".join(Listener.received)
    assert DB_PASSWORD not in heard and "tok-of-the-host" not in heard
    assert "Bearer the-key-the-admin-allows" in heard  # the one key the admin allows does reach it


# ----- the audit rewritten ----------------------------------------------------------------------------------
def sql(db: ControlDB, *statements: str) -> None:
    """Edit the store as someone who can write the database file (and does not hold the audit keys) would."""
    con = sqlite3.connect(db.path)
    for s in statements:
        con.execute(s)
    con.commit()
    con.close()


@pytest.fixture
def trail(tmp_path):
    """Run r: launched by lin, two decisions by ana (claimed, applied), a comment, a third decision, stopped."""
    db = ControlDB(tmp_path / "control.sqlite")
    db.create_run("r", "runs/r", by="lin@lab.example")
    d1, d2 = db.add_decisions("r", [("t1", "approve", None), ("t2", "reject", None)], "ana@lab.example")
    db.claim_decisions("r", "pid:1")
    db.mark_decision(d1.id, "applied", "ok", step=3)
    db.mark_decision(d2.id, "applied", "ok", step=3)
    db.add_comment("r", "t1", "ana@lab.example", "looks right")
    db.add_decisions("r", [("t3", "reject", None)], "ana@lab.example")
    db.mark_stopped("r", by="lin@lab.example")
    assert db.verify_audit("r").ok
    return db


def test_stripping_the_hashes_and_then_editing_a_decision_fails_verify(trail):
    sql(
        trail,
        "UPDATE decision_events SET row_hash = NULL, prev_hash = NULL, digest = NULL WHERE run_id = 'r'",
        "UPDATE decisions SET action = 'approve' WHERE task_id = 't3'",
    )
    assert not trail.verify_audit("r").ok


def test_a_chain_recomputed_without_the_key_fails_verify(trail):
    """The attacker knows the scheme: edits a decision, then recomputes every digest and hash with sha256, and
    removes what would need the key (sequence numbers, key ids)."""
    from storage.audit_chain import EVENT_FIELDS, GENESIS, canonical, decision_digest

    sql(trail, "UPDATE decisions SET author = 'eve@lab.example' WHERE task_id = 't1'")
    decisions = {d.id: d for d in trail.decisions("r")}
    prev, statements = GENESIS, []
    for e in trail.decision_events("r"):
        if "seq" in type(e).model_fields:
            e.seq = e.key_id = None
        if e.kind == "added":
            e.digest = decision_digest(decisions[e.decision_id])
        values = {f: getattr(e, f) for f in EVENT_FIELDS} | {"at": e.at, "prev_hash": prev}
        row = hashlib.sha256(canonical(values)).hexdigest()
        digest = f"'{e.digest}'" if e.digest else "NULL"
        statements.append(
            f"UPDATE decision_events SET digest = {digest}, prev_hash = '{prev}', row_hash = '{row}', "
            + ("seq = NULL, key_id = NULL, " if "seq" in type(e).model_fields else "")
            + f"actor = actor WHERE id = {e.id}"
        )
        prev = row
    sql(trail, *statements)
    assert not trail.verify_audit("r").ok


def test_deleting_the_last_decision_with_its_events_fails_verify(trail):
    (last,) = [d for d in trail.decisions("r") if d.task_id == "t3"]
    sql(
        trail,
        f"DELETE FROM decision_events WHERE decision_id = {last.id} OR kind = 'stopped'",
        f"DELETE FROM decisions WHERE id = {last.id}",
        "UPDATE runs SET stopped_by = NULL",
    )
    assert not trail.verify_audit("r").ok


def test_deleting_a_runs_whole_trail_fails_verify(trail):
    sql(trail, *(f"DELETE FROM {t} WHERE run_id = 'r'" for t in ("decision_events", "decisions", "comments")))
    assert not trail.verify_audit("r").ok


@pytest.mark.parametrize(
    "edit",
    [
        "UPDATE decisions SET claimed_by = 'pid:666' WHERE task_id = 't1'",
        "UPDATE comments SET text = 'looks wrong' WHERE task_id = 't1'",
        "UPDATE runs SET launched_by = 'eve@lab.example'",
        "UPDATE runs SET stopped_by = 'eve@lab.example'",
    ],
    ids=["claimed_by", "comment", "launched_by", "stopped_by"],
)
def test_claims_comments_launch_and_stop_are_inside_the_chain(trail, edit):
    sql(trail, edit)
    assert not trail.verify_audit("r").ok


def test_verify_checks_a_head_kept_elsewhere(trail):
    head = trail.verify_audit("r").head
    (d,) = trail.add_decisions("r", [("t4", "approve", None)], "ana@lab.example")
    assert trail.verify_audit("r", expect_head=head).ok  # events after the kept head are fine
    assert not trail.verify_audit("r", expect_head="0" * 64).ok


# ----- exports ----------------------------------------------------------------------------------------------
def test_the_table_toolbar_exports_nothing_and_blank_or_full_width_formulas_are_quoted(tmp_path):
    import tomllib

    shipped = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert shipped["client"]["disableDataExport"] is True
    assert set(shipped["server"]["allowedHosts"]) == {"localhost", "127.0.0.1", "::1"}
    for hostile in ("＝1+1", "＋1", "－1", "＠SUM(A1)", " =1+1", "\n=1+1", "\u00a0=1", "\u200b=1+1", "\ufeff=1"):
        assert safe_cell(hostile) == "'" + hostile, repr(hostile)
    assert safe_cell("ana") == "ana" and safe_cell(-1) == -1


# ----- login ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """(workspace, run id, store): a gated run of 4 variants the pages read."""
    base = tmp_path_factory.mktemp("lab")
    ws, runs = base / "ws", base / "runs"
    with lab_env(ws, runs):
        build_review_run(ws, runs, "gated", 4)
        yield ws, "gated", ControlDB(ws / "control.sqlite")


def app_test(path: str, user: dict | None, settings: dict | None = None, run_id: str = "gated"):
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    st.cache_data.clear()
    st.cache_resource.clear()
    at = AppTest.from_file(str(ROOT / path), default_timeout=120)
    if settings is not None:
        at.secrets.update(settings)
    at.user = user or {"is_logged_in": False}
    at.session_state["lab_run"] = run_id
    return at.run()


def test_an_unverified_email_gets_no_role(lab):
    ws, run_id, db = lab
    user = {"is_logged_in": True, "email": "ana@lab.example", "email_verified": False}
    at = app_test("pages/3_Review.py", user, {"auth": AUTH, **ROLES})
    assert not at.exception
    assert not [b for b in at.button if b.key and b.key.startswith("review_")] and not at.dataframe
    assert any("did not verify" in e.value for e in at.error)


@pytest.mark.parametrize(
    "secret", ["k", "…a long random string: python -c 'import secrets; print(secrets.token_hex(32))'"]
)
def test_a_guessable_cookie_secret_is_refused(lab, tmp_path, secret):
    settings = {"auth": {**AUTH, "cookie_secret": secret}, **ROLES}
    user = {"is_logged_in": True, "email": "ana@lab.example", "email_verified": True}
    at = app_test("pages/3_Review.py", user, settings)
    assert not at.exception and not at.dataframe and any("cookie_secret" in e.value for e in at.error)
    file = tmp_path / "secrets.toml"
    file.write_text("[auth]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in settings["auth"].items()))
    assert "cookie_secret" in (lab_serving_problem("0.0.0.0", file) or "")


def test_a_decision_records_the_issuer_that_vouched_for_its_reviewer(lab):
    ws, run_id, db = lab
    user = {"is_logged_in": True, "email": "ana@lab.example", "email_verified": True, "iss": "https://idp.lab"}
    at = app_test("pages/3_Review.py", user, {"auth": AUTH, **ROLES})
    at.checkbox(key="review_all").check().run()
    at.button(key="review_bulk_reject").click().run()
    assert not at.exception
    added = [e for e in db.decision_events(run_id) if e.kind == "added"]
    assert added and {e.actor for e in added} == {"ana@lab.example via https://idp.lab"}
    assert {d.author for d in db.decisions(run_id)} == {"ana@lab.example"} and db.verify_audit(run_id).ok


# ----- a read-only user writes ------------------------------------------------------------------------------
def test_a_read_only_user_cannot_change_the_labs_review_mode(lab):
    ws, run_id, db = lab
    ro = {"is_logged_in": True, "email": "ro@lab.example", "email_verified": True}
    at = app_test("pages/3_Review.py", ro, {"auth": AUTH, **ROLES})
    at.session_state["review_gated"] = True  # the widget's state sent as a browser would, disabled or not
    at.run()
    assert not at.exception
    assert not (ws / "app_prefs.json").exists() or "review" not in json.loads((ws / "app_prefs.json").read_text())
    with pytest.raises(Refused):
        review.set_review_mode(AppPaths(ws, ws), True, actor_of("ro@lab.example", POLICY))


def test_opening_buffer_writes_nothing(lab):
    ws, run_id, db = lab
    at = app_test("pages/4_Buffer.py", None)
    assert not at.exception
    assert not (ws / "exports").exists()


def test_a_comment_is_shown_as_plain_text(lab):
    ws, run_id, db = lab
    at = app_test("pages/3_Review.py", None)
    tid = at.selectbox(key="review_focus").value
    hostile = "![pixel](http://tracker.example/p.png) [the docs](http://phish.example)"
    db.add_comment(run_id, tid, "eve", hostile)
    at = app_test("pages/3_Review.py", None)
    assert not at.exception
    assert not any(hostile in m.value for m in at.markdown)
    assert any(hostile in t.value for t in at.text)


# ----- the table toolbar, in a browser ----------------------------------------------------------------------
def toolbar_labels(tmp_path: Path, args: tuple[str, ...]) -> list[str]:
    """The labels of the buttons Streamlit's toolbar shows over the Buffer page's table, served with `args`."""
    from browser_helpers import chromium_page, open_page, serve

    ws, runs = tmp_path / "ws", tmp_path / "runs"
    if not (runs / "pooled").exists():
        build_review_run(ws, runs, "pooled", 4)
    with serve(ws, runs, tmp_path / f"app{len(args)}.log", args=args) as url, chromium_page() as pg:
        open_page(pg, f"{url}/Buffer", "Replay buffer")
        table = pg.locator('[data-testid="stDataFrame"]').first
        table.wait_for()
        table.hover()
        toolbar = pg.locator('[data-testid="stElementToolbar"]').first
        toolbar.locator("button").first.wait_for()
        return [b.get_attribute("aria-label") or b.inner_text() for b in toolbar.locator("button").all()]


@pytest.mark.browser
def test_the_table_toolbar_offers_no_csv_download_in_a_browser(tmp_path):
    """Streamlit's own CSV download over a table writes user text as it is (no neutralizing): the shipped
    config turns it off. Served with it forced back on, the same toolbar shows the button (the probe works)."""
    from browser_helpers import need_chromium

    need_chromium()
    shipped = toolbar_labels(tmp_path, ())
    assert shipped and not [label for label in shipped if "Download" in label], shipped
    forced = toolbar_labels(tmp_path, ("--client.disableDataExport", "false"))
    assert "Download as CSV" in forced, forced
