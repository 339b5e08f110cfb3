"""The app's preferences in the workspace (defaults for new runs, e.g. the review mode), one JSON file."""

from __future__ import annotations

import json
from typing import Any

from rods_lab.paths import AppPaths

PREFS_FILE = "app_prefs.json"


def read_prefs(paths: AppPaths) -> dict[str, Any]:
    """The saved preferences; {} when none were saved or the file is damaged."""
    try:
        return json.loads((paths.workspace / PREFS_FILE).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return {}


def write_prefs(paths: AppPaths, **values: Any) -> dict[str, Any]:
    """Merge values into the workspace's app preferences (e.g. review="gated" for new runs)."""
    prefs = {**read_prefs(paths), **values}
    paths.workspace.mkdir(parents=True, exist_ok=True)
    (paths.workspace / PREFS_FILE).write_text(json.dumps(prefs, indent=2), encoding="utf-8")
    return prefs
