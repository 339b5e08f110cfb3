"""The Review page over a real run's store: each button's decisions, an edit verified before it is sent,
the review-mode switch for new runs."""

from __future__ import annotations

from app_helpers import RUN_ID, awaiting_review, page

from rods_lab.paths import AppPaths
from rods_lab.prefs import read_prefs


def review(reviewer: str = "ana"):
    at = page("pages/3_Review.py")
    at.session_state["review_reviewer"] = reviewer
    return at.run()


def test_review_buttons_write_decisions(app_env):
    _, _, _, run_dir = app_env
    db = AppPaths.from_env().db()
    queue = awaiting_review(run_dir)
    assert len(queue) >= 4
    n = len(db.decisions(RUN_ID))
    at = review()
    assert not at.exception
    first = at.selectbox(key="review_focus").value
    at.button(key="review_focus_approve").click().run()
    assert any("1 decision(s) approve by ana" in s.value for s in at.success)
    at.checkbox(key="review_all").check().run()
    at.button(key="review_bulk_more").click().run()
    assert not at.exception
    got = [(x.task_id, x.action, x.payload_dict(), x.status, x.author) for x in db.decisions(RUN_ID)[n:]]
    assert got[0] == (first, "approve", {}, "pending", "ana")
    assert [g[1:] for g in got[1:]] == [("reseed", {"mode": "synthesize"}, "pending", "ana")] * len(queue)
    assert len({d.batch_id for d in db.decisions(RUN_ID)[n + 1 :]}) == 1


def submit(at, form: str):
    return next(b for b in at.button if b.proto.form_id == form)


def test_review_edit_is_verified_first(app_env):
    db = AppPaths.from_env().db()
    n = len(db.decisions(RUN_ID))
    at = review()
    tid = at.selectbox(key="review_focus").value
    at.button(key="review_focus_edit").click().run()
    at.text_area(key=f"review_c_{tid}_0").input("rm(file_name='no_such_file.txt')")
    submit(at, f"review_fix_{tid}").click().run()
    assert not at.exception
    assert any("Not submitted" in e.value for e in at.error)
    assert len(db.decisions(RUN_ID)) == n  # nothing recorded for a failing edit
    at = review()
    at.button(key="review_focus_edit").click().run()
    said = at.text_area(key=f"review_u_{tid}_0").value
    at.text_area(key=f"review_u_{tid}_0").input(said + " Thanks a lot!")
    submit(at, f"review_fix_{tid}").click().run()
    assert not at.exception and not at.error
    last = db.decisions(RUN_ID)[-1]
    assert (last.task_id, last.action) == (tid, "edit")
    assert last.payload_dict()["task"]["question"][0][0]["content"].endswith("Thanks a lot!")


def test_review_switch_sets_the_mode_for_new_runs(app_env):
    at = page("pages/3_Review.py").run()
    at.toggle(key="review_gated").set_value(True).run()
    assert read_prefs(AppPaths.from_env())["review"] == "gated"
    assert any("launched **gated**" in m.value for m in at.caption)
    at.toggle(key="review_gated").set_value(False).run()
    assert read_prefs(AppPaths.from_env())["review"] == "auto"


def test_review_says_an_ended_run_applies_decisions_only_on_resume(app_env):
    """The fixture's run has finished: its trainer claims no more decisions, so the page says a decision made now
    waits for `rods train --resume`; a running run (this process stands in for its trainer) shows no such note."""
    import os

    from rods_core.process_identity import process_start

    db = AppPaths.from_env().db()
    at = review()
    assert not at.exception
    assert [i.value for i in at.info if "--resume fx_run" in i.value and "finished" in i.value]
    before = db.get_run(RUN_ID)
    try:
        db.register_process(RUN_ID, os.getpid(), process_start(os.getpid()))
        at = review()
        assert not at.exception
        assert not [i.value for i in at.info if "--resume" in i.value]
    finally:
        db.update_run(RUN_ID, status=before.status, pid=before.pid, proc_start=before.proc_start)
