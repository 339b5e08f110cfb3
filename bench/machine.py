"""The machine a benchmark ran on (CPU model, cores, RAM, load, library versions), for every report."""

from __future__ import annotations

import os
import platform
from importlib import metadata
from pathlib import Path


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _ram_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def _version(pkg: str) -> str | None:
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return None


def describe() -> dict:
    """CPU, cores, RAM, the 1-minute load average when measured (other jobs share the cores) and versions."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    gpu = None
    try:
        import torch

        gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    except Exception:  # noqa: BLE001 - a broken CUDA setup must not stop a report
        pass
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "ram_gib": _ram_gib(),
        "gpu": gpu,
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
