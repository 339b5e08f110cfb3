"""The Boundary page over a real run's store: its charts, stepping back, the class-combination filter."""

from __future__ import annotations

from app_helpers import page


def test_boundary_renders_and_steps_back(app_env):
    at = page("pages/2_Boundary.py").run()
    assert not at.exception
    assert len(at.get("plotly_chart")) == 5
    at.toggle(key="boundary_follow").set_value(False).run()
    slider = at.select_slider(key="boundary_step")
    assert slider.value == 3
    slider.set_value(1).run()
    assert not at.exception
    combo = at.selectbox(key="boundary_combo")
    assert combo.options[0] == "all" and len(combo.options) > 1
    combo.select(combo.options[1]).run()
    assert not at.exception
