"""The LLM synthesis backend's client and prompts against a tiny in-process HTTP server on 127.0.0.1:
what is sent, timeouts, retries, HTTP errors, malformed bodies, hostile model answers, prompt files."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from pydantic import ValidationError

from rods_core.benchmarks.bfcl.demo import demo_seeds
from rods_core.benchmarks.bfcl.synth import synthesize
from rods_core.benchmarks.bfcl.synth.llm import ChatEndpoint, LlmError, extract_json
from rods_core.benchmarks.synthesis import STAGES
from rods_core.config import SynthesisConfig
from rods_core.config.prompt_files import Prompts


def _completion(content) -> dict:
    return {
        "id": "x",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
    }


class _Server(BaseHTTPRequestHandler):
    """Answers from a script: each request takes the next (status, body, headers), the last one repeats.

    A body of None blocks the request until the test's `release` event is set (a server that never
    answers in time), so a timeout test waits on the client, never on a sleep.
    """

    script: list = []
    seen: list = []
    release = threading.Event()

    def do_POST(self):  # noqa: N802 - http.server API
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Server.seen.append(
            {"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body}
        )
        status, payload, headers = _Server.script[min(len(_Server.seen), len(_Server.script)) - 1]
        if payload is None:
            _Server.release.wait(30)
            payload = _completion("late")
        out = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
        try:
            self.send_response(status)
            for k, v in {"Content-Type": "application/json", **headers}.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
            pass

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    """A scriptable endpoint on 127.0.0.1 (free port); yields a function that sets the script and returns the URL."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Server)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    _Server.seen, _Server.release = [], threading.Event()

    def serve(*script):
        _Server.script = [s if len(s) == 3 else (*s, {}) for s in script]
        return f"http://127.0.0.1:{httpd.server_address[1]}/v1"

    yield serve
    _Server.release.set()
    httpd.shutdown()
    httpd.server_close()


FAST_RETRY = {"retry-after-ms": "1"}  # the client honours a server's retry delay: keeps retry tests quick


# ----- the client -------------------------------------------------------------------------------------
def test_request_carries_model_messages_bounds_and_only_the_configured_key(server, monkeypatch):
    url = server((200, _completion("hello")))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-shell-key-must-not-leak")
    monkeypatch.setenv("RODS_TEST_KEY", "sk-configured")
    ep = ChatEndpoint(url + "/chat/completions", "tiny", "RODS_TEST_KEY", max_tokens=77, temperature=0.3)
    assert ep.complete([{"role": "user", "content": "hi"}], seed=5) == "hello"
    req = _Server.seen[-1]
    assert req["path"] == "/v1/chat/completions"
    assert req["body"]["model"] == "tiny" and req["body"]["max_tokens"] == 77 and req["body"]["seed"] == 5
    assert req["body"]["temperature"] == 0.3 and req["body"]["messages"] == [{"role": "user", "content": "hi"}]
    assert req["headers"].get("authorization") == "Bearer sk-configured"
    assert "sk-configured" not in repr(ep)
    # Without api_key_env nothing is sent, not even the shell's OPENAI_API_KEY.
    ChatEndpoint(url, "tiny").complete([{"role": "user", "content": "hi"}])
    assert "authorization" not in _Server.seen[-1]["headers"]
    assert "sk-shell" not in json.dumps(_Server.seen)


def test_timeout_is_bounded_and_retried(server):
    url = server((200, None))  # never answers until released
    ep = ChatEndpoint(url, "m", timeout_s=0.3, max_retries=1)
    with pytest.raises(LlmError, match=r"did not answer within 0.3 s \(1 retries\)"):
        ep.complete([{"role": "user", "content": "x"}])
    assert len(_Server.seen) == 2  # the request and one retry


def test_server_errors_are_retried_then_succeed(server):
    url = server((503, {"error": "busy"}, FAST_RETRY), (500, "oops", FAST_RETRY), (200, _completion("fine")))
    assert ChatEndpoint(url, "m", max_retries=2).complete([{"role": "user", "content": "x"}]) == "fine"
    assert len(_Server.seen) == 3


def test_persistent_server_error_gives_up_after_the_retries(server):
    url = server((500, {"error": "down"}, FAST_RETRY))
    with pytest.raises(LlmError, match="answered HTTP 500"):
        ChatEndpoint(url, "m", max_retries=2).complete([{"role": "user", "content": "x"}])
    assert len(_Server.seen) == 3


def test_client_errors_are_not_retried(server):
    url = server((400, {"error": {"message": "bad model"}}))
    with pytest.raises(LlmError, match="answered HTTP 400"):
        ChatEndpoint(url, "m", max_retries=3).complete([{"role": "user", "content": "x"}])
    assert len(_Server.seen) == 1


@pytest.mark.parametrize(
    "body",
    ["this is not json {", {"no": "choices"}, {"choices": []}, {"choices": [{"message": {"content": None}}]}],
    ids=["not-json", "no-choices", "empty-choices", "null-content"],
)
def test_malformed_answers_are_clear_errors(server, body):
    url = server((200, body))
    with pytest.raises(LlmError, match="not a chat completion|no choices"):
        ChatEndpoint(url, "m", max_retries=0).complete([{"role": "user", "content": "x"}])


def test_unreachable_endpoint_is_a_clear_error():
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(LlmError, match="unreachable"):
        ChatEndpoint(f"http://127.0.0.1:{port}/v1", "m", timeout_s=2, max_retries=0).complete([])


def test_extract_json_reads_fenced_chatty_answers_and_refuses_the_rest():
    assert extract_json('Sure!\n```json\n{"turns": ["a"]}\n```') == {"turns": ["a"]}
    assert extract_json('ok {"accept": true} trailing') == {"accept": True}
    for bad, why in (("traveler traveler", "no JSON"), ('{"turns": [', "not valid JSON"), ("[" * 50_000, "deeply")):
        with pytest.raises(LlmError, match=why):
            extract_json(bad)


# ----- prompt files -----------------------------------------------------------------------------------
def test_builtin_prompts_load_and_fill():
    msgs = Prompts().messages("rewrite", turns="Turn 1: ...", n_turns=1)
    assert msgs[0]["role"] == "system" and "JSON" in msgs[0]["content"]
    assert "Turn 1: ..." in msgs[1]["content"] and "exactly 1 entries" in msgs[1]["content"]
    assert "$" not in Prompts().messages("critique", turns="T")[1]["content"]


def test_prompts_dir_overrides_file_by_file(tmp_path, server):
    (tmp_path / "rewrite_user.md").write_text("MY PROMPT for $n_turns turns:\n$turns\n")
    cfg = SynthesisConfig(
        backend="llm", endpoint_url=server((200, _completion("no json"))), endpoint_model="m", prompts_dir=str(tmp_path)
    )
    res = synthesize(demo_seeds()[0], 1, set(), cfg.model_copy(update={"max_attempts": 2}))
    sent = _Server.seen[-1]["body"]["messages"]
    assert sent[1]["content"].startswith("MY PROMPT for 4 turns:")
    assert sent[0]["content"] == Prompts().texts["rewrite_system"]  # not overridden: the built-in one
    assert {a.stage for a in res.attempts} == {"rewrite"}


@pytest.mark.parametrize(
    "name, text, why",
    [
        ("rewrite_user.md", "no placeholders", r"missing placeholder\(s\) \['\$n_turns', '\$turns'\]"),
        ("critique_user.md", "$turns and $whatever", r"unknown placeholder\(s\) \['\$whatever'\]"),
        ("critique_user.md", "$turns costs $ 5", "write '\\$\\$'"),
        ("rewrite_system.md", "   \n", "is empty"),
        ("plan.md", "text", "unknown prompt file"),
    ],
)
def test_broken_prompt_files_fail_at_config_time_naming_the_file(tmp_path, name, text, why):
    (tmp_path / name).write_text(text)
    with pytest.raises(ValidationError, match=why) as e:
        SynthesisConfig(prompts_dir=str(tmp_path))
    assert name in str(e.value)
    with pytest.raises(ValidationError, match="not a folder"):
        SynthesisConfig(prompts_dir=str(tmp_path / "missing"))


# ----- hostile model answers --------------------------------------------------------------------------
HOSTILE = [
    "traveler traveler traveler",
    '{"turns": "one string"}',
    '{"turns": []}',
    '{"turns": [1, 2, 3, 4]}',
    '{"turns": [null, "a", "b", "c"]}',
    '{"turns": [["a", "b"], "b", "c", "d"]}',
    '{"turns": ["' + "x" * 5000 + '", "b", "c", "d"]}',
    '{"turns": [{"text": "a"}, "b", "c", "d"]}',
    "[" * 20_000,
    '{"turns": ["", " ", "c", "d"]}',
    "```json\n{broken\n```",
    '{"accept": true}',
]


def test_hostile_answers_reject_every_candidate_with_a_stage_and_reason(server):
    """Whatever the model says, each candidate ends accepted (never, here) or rejected at a named stage."""
    parent = demo_seeds()[0]  # four turns
    for answer in HOSTILE:
        url = server((200, _completion(answer)))
        cfg = SynthesisConfig(backend="llm", endpoint_url=url, endpoint_model="m", max_attempts=2, llm_max_retries=0)
        res = synthesize(parent, 1, set(), cfg)
        assert res.accepted == [], answer[:40]
        for a in res.attempts:
            assert a.stage in STAGES and a.reason and a.variant is None, (answer[:40], a)
        assert any(a.stage == "rewrite" and a.reason.startswith("llm:") for a in res.attempts), answer[:40]


def test_llm_critic_garbage_rejects_at_critique(server):
    url = server((200, _completion("I think it is fine")))
    cfg = SynthesisConfig(llm_critic=True, endpoint_url=url, endpoint_model="judge", max_attempts=3, llm_max_retries=0)
    res = synthesize(demo_seeds()[0], 1, set(), cfg)
    reached = [a for a in res.attempts if a.stage == "critique"]
    assert res.accepted == [] and reached and all("llm critic" in a.reason for a in reached)
    assert _Server.seen and _Server.seen[-1]["body"]["messages"][0]["content"] == Prompts().texts["critique_system"]


# ----- the command ------------------------------------------------------------------------------------
def _cli():
    import typer

    from rods_lab.cli.synth_cmd import synth

    app = typer.Typer()
    app.command()(synth)
    return app


def test_rods_synth_llm_backend_reports_counts_and_refuses_bad_configs(tmp_path, server):
    from typer.testing import CliRunner

    parent, out = demo_seeds()[0], tmp_path / "v.jsonl"
    cfg = tmp_path / "synthesis.yaml"
    cfg.write_text(
        f"synthesis:\n  endpoint_url: {server((200, _completion('garbage')))}\n  endpoint_model: m\n  max_attempts: 3\n"
    )
    args = ["--from", parent.id, "--n", "1", "--out", str(out), "--backend", "llm", "--config", str(cfg), "--json"]
    r = CliRunner().invoke(_cli(), args)
    assert r.exit_code == 0, r.output
    report = json.loads(r.output)
    assert report["accepted"] == 0 and report["stages"]["rewrite"]["rejected"] >= 1
    assert "llm: the model's answer holds no" in report["stages"]["rewrite"]["reasons"]
    for text, why in (
        ("synthesis: [unclosed", "not valid YAML"),
        ("- a list", "expected a mapping"),
        ("synthesis: 3", "expected a mapping"),
        (f"prompts_dir: {tmp_path / 'nope'}", "not a folder"),
        ("distance: 2", "distance"),
    ):
        cfg.write_text(text)
        bad = tmp_path / "bad.jsonl"
        r = CliRunner().invoke(_cli(), ["--from", parent.id, "--n", "1", "--out", str(bad), "--config", str(cfg)])
        assert r.exit_code == 2 and why in r.output and str(cfg) in r.output, (text, r.output)
        assert not bad.exists()
