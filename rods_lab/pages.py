"""The app's pages, listed once: app.py's navigation, every page's title bar and the tests read this list,
so a new page is one file under pages/ and one line here."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class PageSpec:
    """One page of the app: its file under pages/, its name in the navigation (and URL), its icon, its heading."""

    file: str
    title: str
    icon: str  # a Material icon shipped with Streamlit: emoji need a system font that servers often lack
    heading: str

    @property
    def material(self) -> str:
        return f":material/{self.icon}:"


HOME = PageSpec("app.py", "Home", "home", "RODS Lab")
PAGES: tuple[PageSpec, ...] = (
    PageSpec("pages/1_Launch.py", "Launch", "rocket_launch", "Launch a run"),
    PageSpec("pages/2_Boundary.py", "Boundary", "scatter_plot", "Capability boundary"),
    PageSpec("pages/3_Review.py", "Review", "rule", "Synthesis review"),
    PageSpec("pages/4_Buffer.py", "Buffer", "inventory_2", "Replay buffer"),
    PageSpec("pages/5_Seeds.py", "Seeds", "eco", "Seeds"),
    PageSpec("pages/6_Compare.py", "Compare", "compare_arrows", "Compare runs"),
)


def page_of(script: str | Path) -> PageSpec:
    """The entry of a page script (by its file name, as Streamlit gives `__file__`)."""
    name = Path(script).name
    for spec in PAGES:
        if Path(spec.file).name == name:
            return spec
    raise KeyError(f"{name}: not in rods_lab.pages.PAGES; add the page there")
