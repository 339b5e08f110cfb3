"""rods_lab.prefs: the app's preferences for new runs, kept in the workspace."""

from __future__ import annotations

from rods_lab.paths import AppPaths
from rods_lab.prefs import PREFS_FILE, read_prefs, write_prefs


def test_prefs_roundtrip_and_a_damaged_file_reads_as_none_saved(tmp_path):
    paths = AppPaths(tmp_path / "ws", tmp_path / "runs")
    assert read_prefs(paths) == {}
    write_prefs(paths, review="gated")
    assert write_prefs(paths, other=1) == {"review": "gated", "other": 1}
    assert read_prefs(paths)["review"] == "gated"
    (paths.workspace / PREFS_FILE).write_text("{not json", encoding="utf-8")
    assert read_prefs(paths) == {}


def test_each_user_keeps_their_own_choices_beside_the_workspace_defaults(tmp_path):
    from rods_lab.prefs import read_user_prefs, write_user_prefs

    paths = AppPaths(tmp_path / "ws", tmp_path / "runs")
    write_prefs(paths, review="gated")
    assert read_user_prefs(paths, "ana@lab") == {}
    write_user_prefs(paths, "ana@lab", run="rods_1")
    write_user_prefs(paths, "bo@lab", run="static_1")
    assert write_user_prefs(paths, "ana@lab", other=2) == {"run": "rods_1", "other": 2}
    assert read_user_prefs(paths, "bo@lab") == {"run": "static_1"}
    assert read_prefs(paths)["review"] == "gated"
