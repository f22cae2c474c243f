"""The role world of tests/dashboard/teams/roles_world.py as a module-wide fixture."""

from __future__ import annotations

import pytest

from tests.dashboard.teams.roles_world import build_world


@pytest.fixture(scope="module")
def role_world(django_db_setup, django_db_blocker, tmp_path_factory):
    """The world, built once for this module inside a transaction that is rolled back at its end.

    Each case's own `db` transaction nests inside it as a savepoint and is rolled back after the
    case, so an allowed change (a deletion, an edit) never reaches the next case, as when the world
    was rebuilt for every case (0.087 s each, five times the request's own cost)."""
    from django.db import transaction

    with django_db_blocker.unblock():
        outer = transaction.atomic()
        # Marked as a test case's own block, as Django's TestCase marks its class-wide atomic.
        outer._from_testcase = True  # type: ignore[attr-defined]
        outer.__enter__()
        try:
            yield build_world(tmp_path_factory.mktemp("roles"))
        finally:
            transaction.set_rollback(True)
            outer.__exit__(None, None, None)
