"""The first page renders the seed set and switches split and task without an exception."""

from streamlit.testing.v1 import AppTest


def test_home_renders_and_reacts():
    at = AppTest.from_file("../app.py", default_timeout=60).run()
    assert not at.exception
    assert at.metric[0].value == "400"
    at.selectbox(key="home_task").select(at.selectbox(key="home_task").options[3]).run()
    assert not at.exception
    assert any("Turn 1" in m.value for m in at.markdown)
