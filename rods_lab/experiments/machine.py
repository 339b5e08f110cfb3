"""The machine a benchmark ran on (CPU model, cores, RAM, load, library versions), for every report."""

from __future__ import annotations

import platform
import subprocess
from importlib import metadata
from pathlib import Path

import psutil


def _cpu_model() -> str:
    """The CPU's marketing name: psutil has none, so the OS's own record (Linux's cpuinfo, macOS's sysctl),
    else the architecture."""
    try:
        if platform.system() == "Darwin":
            done = subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True)
            if done.returncode == 0 and done.stdout.strip():
                return done.stdout.strip()
        elif Path("/proc/cpuinfo").is_file():
            for line in Path("/proc/cpuinfo").read_text().splitlines():
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _ram_gib() -> float:
    return round(psutil.virtual_memory().total / 2**30, 1)


def _version(pkg: str) -> str | None:
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return None


def cpu_kernels() -> str | None:
    """The vector instruction set torch's own CPU kernels dispatch to ("AVX2", "AVX512", ...), or None without
    torch. Softmax, norms and reductions round differently under each, so a CPU run repeats bit for bit only
    under one set; ATEN_CPU_CAPABILITY=avx2 gives an AVX-512 machine an AVX2 machine's kernels
    (docs/experiments/determinism.md)."""
    try:
        import torch

        return torch.backends.cpu.get_cpu_capability()
    except Exception:  # noqa: BLE001 - a broken torch install must not stop a report
        return None


def describe() -> dict:
    """CPU, cores, RAM, the 1-minute load average when measured (other jobs share the cores) and versions."""
    load = psutil.getloadavg()[0]
    gpu = None
    try:
        import torch

        gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    except Exception:  # noqa: BLE001 - a broken CUDA setup must not stop a report
        pass
    return {
        "cpu": _cpu_model(),
        "cores": psutil.cpu_count(),
        "ram_gib": _ram_gib(),
        "gpu": gpu,
        "cpu_kernels": cpu_kernels(),
        "load_1min": round(load, 2) if load is not None else None,
        "python": platform.python_version(),
        **{pkg: _version(pkg) for pkg in ("torch", "trl", "transformers", "duckdb")},
    }


def markdown(info: dict) -> str:
    return (
        f"Machine: {info['cpu']}, {info['cores']} cores, {info['ram_gib']} GiB RAM, GPU: {info['gpu'] or 'none'}; "
        f"load average {info['load_1min']} when measured (shared cores); python {info['python']}, "
        f"torch {info['torch']}, trl {info['trl']}, transformers {info['transformers']}, duckdb {info['duckdb']}."
    )
