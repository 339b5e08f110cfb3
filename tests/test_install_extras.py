"""The GPU hosts' extras and the torch build (Makefile `vllm`, `deepspeed`, `gpu-torch-check`; pyproject extras):
the pinned DeepSpeed resolves beside the installed stack without moving a pin, and `make vllm` refuses a CPU
build of torch on a host with a GPU. The GPU is the one thing faked: an `nvidia-smi` that answers, on PATH."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.test_vllm import pinned

ROOT = Path(__file__).resolve().parent.parent
EXTRAS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def _make_check(path_prefix: str | None):
    env = dict(os.environ)
    if path_prefix:
        env["PATH"] = f"{path_prefix}{os.pathsep}{env['PATH']}"
    return subprocess.run(
        ["make", "-s", "--no-print-directory", "gpu-torch-check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_vllm_refuses_a_cpu_torch_on_a_host_with_a_gpu(tmp_path):
    import torch

    if torch.version.cuda is not None:
        pytest.skip("this venv's torch is a CUDA build: nothing to refuse")
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "nvidia-smi").write_text("#!/bin/sh\necho 'GPU 0: a GPU this test pretends to have'\n")
    (fake / "nvidia-smi").chmod(0o755)
    refused = _make_check(str(fake))
    assert refused.returncode != 0
    assert f"torch {torch.__version__} is a CPU build" in refused.stderr
    assert "--force-reinstall --no-deps torch==" in refused.stderr and "--index-url" in refused.stderr
    if shutil.which("nvidia-smi") is None:  # this host: no GPU, so nothing to refuse
        assert _make_check(None).returncode == 0


def test_the_deepspeed_extra_resolves_beside_the_installed_stack(tmp_path):
    """A dry run against this venv (pip's registry, nothing installed, ~20 s): DeepSpeed's pin adds packages but
    moves none of requirements.txt's pins; test_vllm.py resolves it from scratch beside the vLLM extra."""
    (spec,) = EXTRAS["deepspeed"]
    assert spec.startswith("deepspeed==")
    report = tmp_path / "report.json"
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--report", str(report), spec]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    resolved = {
        i["metadata"]["name"].lower(): i["metadata"]["version"] for i in json.loads(report.read_text())["install"]
    }
    assert resolved.pop("deepspeed") == spec.split("==")[1]
    moved = sorted(set(resolved) & {r.name.lower() for r in pinned()})
    assert moved == [], f"installing {spec} would move {moved}"
