"""The role table's rules as functions, without a request: rank order, unknown roles, and the two
choices of action (membership changes, server edits). The role matrix test
(test_permissions.py) checks the same rules through every page; this one fails in a second.
"""

from __future__ import annotations

import pytest

from dashboard.teams.permissions import (
    MATRIX,
    Action,
    Role,
    allows,
    capabilities,
    membership_actions,
    server_edit_action,
)

# Written out, not imported: higher includes lower.
ORDER = ["viewer", "member", "admin", "owner"]


@pytest.mark.parametrize("role", ORDER)
def test_a_role_may_do_exactly_what_its_rank_reaches(role):
    for action, least in MATRIX.items():
        assert allows(role, action) is (ORDER.index(role) >= ORDER.index(least.value)), (role, action)


def test_each_role_is_refused_something_the_next_may_do():
    for lower, higher in zip(ORDER, ORDER[1:], strict=False):
        gap = [a for a in Action if allows(higher, a) and not allows(lower, a)]
        assert gap, f"{higher} may do nothing more than {lower}"


@pytest.mark.parametrize("role", [None, "", "guest", "Owner"])
def test_no_role_or_an_unknown_one_may_do_nothing(role):
    assert not any(allows(role, action) for action in Action)
    assert capabilities(role) == {action.value: False for action in Action}


def test_capabilities_name_every_action_with_its_answer():
    assert capabilities("member") == {action.value: allows("member", action) for action in Action}
    assert capabilities("owner") == {action.value: True for action in Action}
    assert capabilities("viewer")["view"] is True and capabilities("viewer")["manage_members"] is False


def test_touching_an_owner_takes_the_owner_action_as_well():
    assert membership_actions("member") == [Action.MANAGE_MEMBERS]
    assert membership_actions("viewer", "admin") == [Action.MANAGE_MEMBERS]
    assert membership_actions("admin", Role.OWNER) == [Action.MANAGE_MEMBERS, Action.MANAGE_OWNERS]
    assert membership_actions("owner") == [Action.MANAGE_MEMBERS, Action.MANAGE_OWNERS]


@pytest.mark.parametrize(
    ("owned", "stdio", "action"),
    [
        (True, False, Action.EDIT_OWN_SERVER),
        (True, True, Action.EDIT_ANY_SERVER),
        (False, False, Action.EDIT_ANY_SERVER),
        (False, True, Action.EDIT_ANY_SERVER),
    ],
)
def test_only_an_own_http_server_is_edited_as_own(owned, stdio, action):
    assert server_edit_action(owned=owned, stdio=stdio) is action
