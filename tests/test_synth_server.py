"""The llm synthesis backend against a REAL OpenAI-compatible server: `transformers serve` over the tiny
model built in a temp dir. Its weights are untrained, so its answers are garbage: hostile model output.
Every candidate must end accepted after execution-verification or rejected at a named stage with a
reason; nothing may crash. The per-stage counts are printed (pytest -s) and recorded as properties."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from rods_core.benchmarks.bfcl.demo import demo_seeds
from rods_core.benchmarks.bfcl.signature import signature
from rods_core.benchmarks.bfcl.synth import merge_counts, synthesize_many
from rods_core.benchmarks.bfcl.synth.critique import replays_clean
from rods_core.benchmarks.synthesis import STAGES
from rods_core.config import SynthesisConfig

# Not marked slow: model build + server start + both cases took 41 s on the shared 2-core machine.
READY_TIMEOUT_S = 180


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_ready(url: str, proc: subprocess.Popen, log: Path) -> None:
    """Poll /health until it answers 200 (bounded); fail early if the server process died."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"transformers serve exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)  # a poll interval, not a wait on timing: the loop ends on the condition
    pytest.fail(f"transformers serve not ready within {READY_TIMEOUT_S} s:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def tiny_server(tmp_path_factory):
    """(base URL, model name) of `transformers serve` on 127.0.0.1 over a freshly built tiny model."""
    tmp = tmp_path_factory.mktemp("served")
    model = tmp / "tiny"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    subprocess.run(
        [sys.executable, "-m", "rods_lab.cli", "model", "init-tiny", "--out", str(model)],
        check=True,
        env=env,
        timeout=600,
        capture_output=True,
    )
    port, log = _free_port(), tmp / "serve.log"
    cmd = [sys.executable, "-m", "transformers.cli.transformers", "serve", str(model)]
    cmd += ["--host", "127.0.0.1", "--port", str(port), "--device", "cpu", "--log-level", "warning"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        _wait_ready(f"http://127.0.0.1:{port}/health", proc, log)
        yield f"http://127.0.0.1:{port}/v1", str(model)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # its own session: the server and any child it started
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=20)


def _parents():
    """One demo seed per class the demo uses (file system, vehicle, trading, travel)."""
    seen, out = set(), []
    for t in demo_seeds():
        if t.involved_classes[0] not in seen:
            seen.add(t.involved_classes[0])
            out.append(t)
    return out


@pytest.mark.parametrize(
    "name, backend",
    [("llm_rewrite_and_critic", "llm"), ("template_rewrite_llm_critic", "template")],
)
def test_five_stages_end_to_end_against_transformers_serve(tiny_server, record_property, name, backend):
    url, model = tiny_server
    cfg = SynthesisConfig(
        backend=backend,
        llm_critic=True,
        endpoint_url=url,
        endpoint_model=model,
        max_attempts=3,
        llm_max_tokens=48,
        llm_timeout_s=120,
        llm_max_retries=1,
    )
    parents = _parents()
    _, results = synthesize_many(parents, 1, None, cfg)
    by_id = {p.id: p for p in parents}
    for res in results:
        for a in res.attempts:
            if a.variant is not None:  # accepted: every stage passed and the task executes cleanly
                assert [o.stage for o in a.outcomes] == list(STAGES) and all(o.accepted for o in a.outcomes)
                replays_clean(a.variant)
                assert signature(a.variant).topology_hash == signature(by_id[res.parent_id]).topology_hash
            else:
                assert a.stage in STAGES and a.reason, a
                assert all(o.accepted for o in a.outcomes[:-1]) and not a.outcomes[-1].accepted
    counts = merge_counts(results)
    print(f"\n{name}: per-stage counts against transformers serve\n{json.dumps(counts, indent=1)}")
    record_property(f"synth_counts_{name}", json.dumps(counts))
    reasons = " ".join(r for c in counts.values() for r in c["reasons"])
    # The server answered every request: rejections are about what the model said, not the transport.
    assert not any(w in reasons for w in ("unreachable", "did not answer", "HTTP")), reasons
    llm_stage = "rewrite" if backend == "llm" else "critique"
    asked = counts[llm_stage]["accepted"] + counts[llm_stage]["rejected"]
    assert asked >= len(parents), counts  # the model was asked at least once per parent
