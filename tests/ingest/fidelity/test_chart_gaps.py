"""The agent chart breaks its line over days without judged pastes instead of drawing across them."""

from __future__ import annotations

from datetime import date

from ingest.fidelity.charts import gapped


def test_a_day_without_data_breaks_the_line():
    points = [(date(2026, 11, 1), 9, 10), (date(2026, 11, 2), 5, 10), (date(2026, 11, 6), 10, 10)]
    x, y, custom = gapped(points)
    assert x == ["2026-11-01", "2026-11-02", "2026-11-03", "2026-11-06"]
    assert y == [90.0, 50.0, None, 100.0]
    assert custom == [[9, 10], [5, 10], [0, 0], [10, 10]]


def test_consecutive_days_stay_joined():
    points = [(date(2026, 11, 1), 1, 2), (date(2026, 11, 2), 2, 2)]
    assert gapped(points)[1] == [50.0, 100.0]
