"""Plotly's bundle is served from the installed package, not a CDN."""

from __future__ import annotations

from django.contrib.staticfiles import finders


def test_plotly_is_served_from_the_installed_package():
    found = finders.find("vendor/plotly.min.js")
    assert found and found.endswith("plotly.min.js")
    listed = [
        (getattr(storage, "prefix", None), path)
        for finder in finders.get_finders()
        for path, storage in finder.list([])
        if path.endswith("plotly.min.js")
    ]
    assert listed == [("vendor", "plotly.min.js")]
