"""The app's one list of pages (rods_lab.pages.PAGES) is the pages/ folder, and a first visit straight to any
page of a fresh server (a deep link) renders inside the app's navigation under the page's heading."""

from __future__ import annotations

import pytest
from app_helpers import ROOT

from rods_lab.pages import PAGES, page_of


def test_the_page_list_is_the_pages_folder():
    assert sorted(p.file for p in PAGES) == sorted(str(f.relative_to(ROOT)) for f in (ROOT / "pages").glob("*.py"))
    assert len({p.title for p in PAGES}) == len(PAGES)  # titles are the URL paths: one page each
    assert page_of(ROOT / "pages" / "3_Review.py").title == "Review"
    with pytest.raises(KeyError, match="add the page there"):
        page_of("pages/7_Unlisted.py")


@pytest.mark.parametrize("spec", PAGES, ids=lambda p: p.title)
def test_a_first_deep_link_runs_through_app_navigation(tmp_path, monkeypatch, spec):
    from streamlit.runtime.pages_manager import PagesManager
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("RODS_WORKSPACE", str(tmp_path / "ws"))
    monkeypatch.setenv("RODS_RUNS", str(tmp_path / "runs"))
    # Every AppTest run starts like a fresh server: the pages/ folder beside app.py puts Streamlit in its
    # legacy pages/ mode, and switching before the first run is a first visit to the page's URL.
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).switch_page(spec.file).run()
    assert not at.exception
    assert [t.value for t in at.title] == [spec.heading]
    # app.py's st.navigation ran (it is what leaves the legacy mode); without ui.page_setup the page
    # would have run alone under the legacy pages/ navigation and left the flag set.
    assert PagesManager.uses_pages_directory is False
