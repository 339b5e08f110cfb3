"""A first visit straight to a page of a fresh server (a deep link) renders inside the app's navigation."""

from __future__ import annotations

import pytest
from app_helpers import ROOT

PAGES = {
    "pages/1_Launch.py": "Launch a run",
    "pages/2_Boundary.py": "Capability boundary",
    "pages/6_Compare.py": "Compare runs",
}


@pytest.mark.parametrize("page", PAGES)
def test_a_first_deep_link_runs_through_app_navigation(tmp_path, monkeypatch, page):
    from streamlit.runtime.pages_manager import PagesManager
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("RODS_WORKSPACE", str(tmp_path / "ws"))
    monkeypatch.setenv("RODS_RUNS", str(tmp_path / "runs"))
    # Every AppTest run starts like a fresh server: the pages/ folder beside app.py puts Streamlit in its
    # legacy pages/ mode, and switching before the first run is a first visit to the page's URL.
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).switch_page(page).run()
    assert not at.exception
    assert [t.value for t in at.title] == [PAGES[page]]
    # app.py's st.navigation ran (it is what leaves the legacy mode); without lab_ui.page_setup the page
    # would have run alone under the legacy pages/ navigation and left the flag set.
    assert PagesManager.uses_pages_directory is False
