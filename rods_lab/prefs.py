"""The app's preferences in the workspace, one JSON file: defaults for new runs (e.g. the review mode), and
per user, what that user chose (e.g. the run the run pickers open on)."""

from __future__ import annotations

import json
from typing import Any

from rods_lab.paths import AppPaths

PREFS_FILE = "app_prefs.json"
USERS = "users"  # the key under which each user's preferences are kept, by user id ("" when nobody signed in)


def read_prefs(paths: AppPaths) -> dict[str, Any]:
    """The saved preferences; {} when none were saved or the file is damaged."""
    try:
        prefs = json.loads((paths.workspace / PREFS_FILE).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return {}
    return prefs if isinstance(prefs, dict) else {}


def write_prefs(paths: AppPaths, **values: Any) -> dict[str, Any]:
    """Merge values into the workspace's app preferences (e.g. review="gated" for new runs)."""
    prefs = {**read_prefs(paths), **values}
    paths.workspace.mkdir(parents=True, exist_ok=True)
    (paths.workspace / PREFS_FILE).write_text(json.dumps(prefs, indent=2), encoding="utf-8")
    return prefs


def read_user_prefs(paths: AppPaths, user: str) -> dict[str, Any]:
    """What `user` chose (e.g. {"run": "rods_1a2b"}); {} for a user who chose nothing yet."""
    mine = read_prefs(paths).get(USERS, {})
    mine = mine.get(user, {}) if isinstance(mine, dict) else {}
    return mine if isinstance(mine, dict) else {}


def write_user_prefs(paths: AppPaths, user: str, **values: Any) -> dict[str, Any]:
    """Merge values into `user`'s preferences, leaving every other user's and the workspace's alone."""
    users = read_prefs(paths).get(USERS, {})
    users = users if isinstance(users, dict) else {}
    mine = {**read_user_prefs(paths, user), **values}
    write_prefs(paths, **{USERS: {**users, user: mine}})
    return mine
