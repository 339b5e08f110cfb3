"""rods_lab.charts: every region and pool has its colour, and a chart over no data says so instead of failing."""

from __future__ import annotations

import pandas as pd

from rods_core.boundary import REGIONS
from rods_lab import charts
from storage.schema import POOLS


def test_colours_cover_the_library_regions_and_the_store_pools():
    assert set(REGIONS) <= set(charts.REGION_COLORS) and set(POOLS) == set(charts.POOL_COLORS)


def test_a_chart_over_no_data_is_titled_and_annotated():
    empty = pd.DataFrame()
    for fig, title in (
        (charts.boundary_scatter(empty, 4), "Tasks at step 4: mean reward vs variance"),
        (charts.region_counts(empty), "Tasks per region"),
        (charts.task_history(empty), "Reward over steps"),
    ):
        assert fig.layout.title.text == title and fig.layout.annotations[0].text in ("no data yet", "never drawn yet")
