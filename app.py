"""RODS Lab — Streamlit entry point. Run: `make app` (or `streamlit run app.py`)."""

from __future__ import annotations

import pandas as pd
import plotly.express as px
import streamlit as st

from rods_core.seeds import load_seeds, split_of
from rods_core.stats import task_rows

st.set_page_config(page_title="RODS Lab", page_icon="🧭", layout="wide")


@st.cache_data(show_spinner="Reading the BFCL seed set…")
def seed_table() -> pd.DataFrame:
    tasks = load_seeds("all")
    df = pd.DataFrame(task_rows(tasks))
    df["split"] = [split_of(t.id) for t in tasks]
    return df


@st.cache_data
def seed_task(task_id: str) -> dict:
    return next(t for t in load_seeds("all") if t.id == task_id).model_dump(mode="json")


st.title("RODS Lab")
st.caption("Reward-driven online data synthesis for multi-turn tool-use agents — the seed set (BFCL v3 multi-turn).")
df = seed_table()
split = st.segmented_control("Split", ["train", "test", "all"], default="train", key="home_split") or "train"
view = df if split == "all" else df[df["split"] == split]

c1, c2, c3, c4 = st.columns(4)
c1.metric("Tasks", len(view))
c2.metric("Class combinations", view["class_combo"].nunique())
c3.metric("Mean calls per task", f"{view['calls'].mean():.1f}")
c4.metric("Max dependency depth", int(view["depth"].max()))

left, mid, right = st.columns(3)
left.plotly_chart(px.histogram(view, x="category", title="Tasks per category"), use_container_width=True)
mid.plotly_chart(
    px.histogram(view, y="class_combo", title="Tasks per class combination").update_yaxes(categoryorder="total ascending"),
    use_container_width=True,
)
right.plotly_chart(px.histogram(view, x="depth", color="category", title="Dependency depth"), use_container_width=True)

st.subheader("Task viewer")
task_id = st.selectbox("Task", view["id"].tolist(), key="home_task")
if task_id:
    task = seed_task(task_id)
    st.write(f"**{task['category']}** · classes: {', '.join(task['involved_classes'])}")
    for i, (turn, calls) in enumerate(zip(task["question"], task["ground_truth"], strict=True)):
        with st.container(border=True):
            said = " ".join(m["content"] for m in turn) or "*(no user message: a held-back function arrives)*"
            st.markdown(f"**Turn {i + 1}** — {said}")
            if str(i) in task.get("missed_function", {}):
                st.info(f"Functions arriving now: {', '.join(task['missed_function'][str(i)])}")
            st.code("\n".join(calls) or "(no call expected: the agent should ask)", language="python")
    with st.expander("Initial state"):
        st.json(task["initial_config"])
