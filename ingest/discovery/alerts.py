"""The release alert of tool discovery: a tool's load-to-call rate falls after a release.

For each server touched by new discovery records, its latest release (a snapshot with
``is_release``) splits the loads of each of its tools into before and after, each side within
DISCOVERY_RATE_WINDOW_DAYS of the release. When both sides hold at least DISCOVERY_RATE_MIN_LOADS
loads and the rate after is more than DISCOVERY_RATE_DROP_POINTS points below the rate before, an
alert opens through the alerts' channels (``open_or_update_alert``; rule key
``tool:<server>/<tool>:load_to_call_drop:<release snapshot id>``); back within the limit, it
resolves. The release changed how the tool is named or described, and the model now loads it
without calling it.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta

from django.conf import settings

from dashboard.alerts.budgets import open_or_update_alert, resolve_alert
from dashboard.alerts.models import Alert, Level, Measure
from dashboard.servers.models import Snapshot
from dashboard.teams.models import Team
from ingest.discovery.figures import Catalog, client_names
from ingest.discovery.models import DiscoveryLoad


def rate_points(loads: Iterable[int]) -> tuple[int, float | None]:
    """(loads, load-to-call rate in points) of loads given as their call counts."""
    calls = list(loads)
    if not calls:
        return 0, None
    return len(calls), 100 * sum(1 for c in calls if c) / len(calls)


def evaluate_load_rate_alerts(team: Team, tools: Iterable[str]) -> list[str]:
    """Open or resolve the alerts of the servers of these tools (as logs name them); the rule keys
    breached."""
    catalog = Catalog(team)
    located = (catalog.locate(t) for t in set(tools))
    breached = []
    for key in sorted({found[0] for found in located if found is not None}):
        server = catalog.servers.get(key)
        if server is None:
            continue
        release = (
            Snapshot.objects.filter(server=server, is_release=True, previous__isnull=False)
            .order_by("-first_seen")
            .first()
        )
        if release is None:
            continue
        window = timedelta(days=settings.DISCOVERY_RATE_WINDOW_DAYS)
        for tool in (str(t.get("name", "")) for t in catalog.snapshots[key].tools_raw):
            loads = DiscoveryLoad.objects.filter(session__team=team, tool__in=client_names(server.name, tool))
            before = loads.filter(at__gte=release.first_seen - window, at__lt=release.first_seen)
            after = loads.filter(at__gte=release.first_seen, at__lt=release.first_seen + window)
            n_before, rate_before = rate_points(before.values_list("calls", flat=True))
            n_after, rate_after = rate_points(after.values_list("calls", flat=True))
            rule_key = f"tool:{server.name}/{tool}:load_to_call_drop:{release.pk}"
            if (
                rate_before is None
                or rate_after is None
                or min(n_before, n_after) < settings.DISCOVERY_RATE_MIN_LOADS
            ):
                continue
            drop = round(rate_before - rate_after, 1)
            if drop > settings.DISCOVERY_RATE_DROP_POINTS:
                message = (
                    f"{server.name}/{tool}: after release {release.label} the model called it after "
                    f"{rate_after:.0f}% of its loads ({n_after}), against {rate_before:.0f}% before ({n_before}): "
                    f"down {drop:.1f} points. Check what the release changed in its name or description."
                )
                open_or_update_alert(
                    team,
                    rule_key,
                    Measure.LOAD_TO_CALL_DROP,
                    Level.WARNING,
                    drop,
                    settings.DISCOVERY_RATE_DROP_POINTS,
                    message,
                    f"{server.name}/{tool}",
                    server=server,
                    snapshot=release,
                )
                breached.append(rule_key)
            elif Alert.objects.open().filter(team=team, rule_key=rule_key).exists():
                resolve_alert(team, rule_key, snapshot=release, value=drop)
    return breached
