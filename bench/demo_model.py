"""The model a bench plays when none is named: the trained demo model (configs/demo-cpu.yaml's model.path)
once it is built, and the demo seeds it plays. An untrained model's long, broken messages make a different
workload from a trained policy's short tool calls, so a figure taken on one does not hold for the other."""

from __future__ import annotations

from pathlib import Path

from rods_core.config import RunConfig, read_config_data
from rods_core.tasksets import run_benchmark, select_seeds

ROOT = Path(__file__).resolve().parent.parent
DEMO_CONFIG = ROOT / "configs" / "demo-cpu.yaml"


def demo_model(config: Path = DEMO_CONFIG) -> Path | None:
    """The demo config's model folder (relative to the repository) when it holds a model, else None (not built
    yet, or still being built: its config.json is written last)."""
    path = Path(read_config_data(config)["model"]["path"])
    path = path if path.is_absolute() else ROOT / path
    return path if (path / "config.json").exists() else None


def demo_tasks() -> list:
    """The demo seeds (BFCL multi-turn's single-class base train seeds), as a run with `seeds.subset: demo` draws
    them: through the library's task sets, not the benchmark's wing."""
    cfg = RunConfig.model_validate({"seeds": {"subset": "demo"}})
    return select_seeds(cfg, run_benchmark(cfg))
