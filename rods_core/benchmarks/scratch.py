"""Temporary folders for episodes and verifications, made inside a chosen root: a run puts them in its own
folder (`SCRATCH`), so what a killed process leaves behind (BFCL memory's snapshot files) goes with the run."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SCRATCH = "scratch"  # the run folder's subfolder for them


def run_scratch(run_dir: str | Path) -> Path:
    """Where a run's episodes, held-out evaluations and synthesis verifications write: inside its folder."""
    return Path(run_dir) / SCRATCH


@contextmanager
def scratch_folder(root: str | Path | None, prefix: str) -> Iterator[Path]:
    """A fresh folder inside `root` (made if missing; the system's temporary folder when None), removed on
    exit with everything written in it."""
    if root is not None:
        Path(root).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=prefix, dir=root) as tmp:
        yield Path(tmp)
