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
