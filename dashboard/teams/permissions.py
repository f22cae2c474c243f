"""The role matrix: every action a team member can take, mapped to the least role that may take it.

This table is the only place that decides who may do what. Views ask `dashboard.teams.access`,
templates read the `can` context (the same table), the stack import asks `allows()`. docs/roles.md
prints this table; tests/dashboard/teams/test_permissions.py walks every URL with
every role against it.
"""

from __future__ import annotations

from enum import StrEnum


class Role(StrEnum):
    # Also the choices of Membership.role (dashboard.teams.models), so the two never drift.
    OWNER = "owner"
    ADMIN = "admin"
    MEMBER = "member"
    VIEWER = "viewer"


# Higher includes lower: an owner may do everything an admin may, and so on.
RANK = {Role.VIEWER: 0, Role.MEMBER: 1, Role.ADMIN: 2, Role.OWNER: 3}


class Action(StrEnum):
    VIEW = "view"
    REGISTER_HTTP_SERVER = "register_http_server"
    REGISTER_STDIO_SERVER = "register_stdio_server"
    EDIT_OWN_SERVER = "edit_own_server"
    EDIT_ANY_SERVER = "edit_any_server"
    POLL_HTTP_SERVER = "poll_http_server"
    POLL_STDIO_SERVER = "poll_stdio_server"
    IMPORT_STACK = "import_stack"
    REPLACE_ANY_STACK = "replace_any_stack"
    MANAGE_BUDGETS = "manage_budgets"
    HANDLE_ALERTS = "handle_alerts"
    MANAGE_CHANNELS = "manage_channels"
    UPLOAD_LOG = "upload_log"
    MANAGE_WATCH = "manage_watch"
    DELETE_QUARANTINE = "delete_quarantine"
    ADD_REFERENCE = "add_reference"
    REMOVE_REFERENCE = "remove_reference"
    MANAGE_PRICES = "manage_prices"
    MANAGE_TOKENS = "manage_tokens"
    MANAGE_CAPTURE_SETTINGS = "manage_capture_settings"
    MANAGE_MEMBERS = "manage_members"
    VIEW_HEALTH = "view_health"
    MANAGE_COUNTING = "manage_counting"
    MANAGE_OWNERS = "manage_owners"
    LEAVE_TEAM = "leave_team"


MATRIX: dict[Action, Role] = {
    Action.VIEW: Role.VIEWER,
    Action.REGISTER_HTTP_SERVER: Role.MEMBER,
    # A stdio server runs a command on the worker: registering, changing or polling one is admin work.
    Action.REGISTER_STDIO_SERVER: Role.ADMIN,
    # Own = an HTTP/SSE server the user registered; a stdio server is never "own".
    Action.EDIT_OWN_SERVER: Role.MEMBER,
    Action.EDIT_ANY_SERVER: Role.ADMIN,
    Action.POLL_HTTP_SERVER: Role.MEMBER,
    Action.POLL_STDIO_SERVER: Role.ADMIN,
    # Importing creates servers and stacks; what it may update follows the two edit rows above.
    Action.IMPORT_STACK: Role.MEMBER,
    Action.REPLACE_ANY_STACK: Role.ADMIN,
    # The rules the CI gate enforces: a member must not be able to loosen them.
    Action.MANAGE_BUDGETS: Role.ADMIN,
    Action.HANDLE_ALERTS: Role.MEMBER,
    Action.MANAGE_CHANNELS: Role.ADMIN,
    Action.UPLOAD_LOG: Role.MEMBER,
    Action.MANAGE_WATCH: Role.ADMIN,
    # The team's record of what its logs got wrong: cleared by those who run the captures.
    Action.DELETE_QUARANTINE: Role.ADMIN,
    Action.ADD_REFERENCE: Role.MEMBER,
    Action.REMOVE_REFERENCE: Role.ADMIN,
    Action.MANAGE_PRICES: Role.ADMIN,
    Action.MANAGE_TOKENS: Role.ADMIN,
    # No page edits these yet (Django's admin site does, for staff); the row says who may once
    # one does.
    Action.MANAGE_CAPTURE_SETTINGS: Role.ADMIN,
    # Invite (by e-mail or link), revoke an invite, change a role, remove a member: admin work,
    # as long as no owner is involved (see the next row).
    Action.MANAGE_MEMBERS: Role.ADMIN,
    # Anything that gives, takes or touches the owner role: inviting an owner, making someone an
    # owner, changing or removing an owner. A team always keeps at least one owner.
    Action.MANAGE_OWNERS: Role.OWNER,
    # Anyone may leave a team, except its last owner.
    Action.LEAVE_TEAM: Role.VIEWER,
    # The operator's view: worker hosts, queue depths, database and broker error messages.
    Action.VIEW_HEALTH: Role.ADMIN,
    # What the team's figures are counted in, and the provider key that pays for exact counts.
    Action.MANAGE_COUNTING: Role.ADMIN,
}

DESCRIPTIONS: dict[Action, str] = {
    Action.VIEW: "See every page of the team (servers, snapshots, stacks, alerts, budgets, channels, "
    "ingest jobs, quarantine, agents, calls, references, prices, API token names)",
    Action.REGISTER_HTTP_SERVER: "Register an HTTP or SSE server (becomes its owner)",
    Action.REGISTER_STDIO_SERVER: "Register a stdio server, or turn a server into one",
    Action.EDIT_OWN_SERVER: "Edit or delete an HTTP/SSE server they registered",
    Action.EDIT_ANY_SERVER: "Edit or delete any server, stdio included",
    Action.POLL_HTTP_SERVER: "Poll now an HTTP/SSE server",
    Action.POLL_STDIO_SERVER: "Poll now a stdio server",
    Action.IMPORT_STACK: "Import a client config: add its servers and a stack; update only servers "
    "and stacks they may edit",
    Action.REPLACE_ANY_STACK: "Re-import over a stack someone else imported",
    Action.MANAGE_BUDGETS: "Add, change, disable or delete a budget rule (what the CI gate enforces)",
    Action.HANDLE_ALERTS: "Acknowledge or silence an alert",
    Action.MANAGE_CHANNELS: "Add, test, enable, disable or delete a channel; see a webhook's secret",
    Action.UPLOAD_LOG: "Upload a log to ingest",
    Action.MANAGE_WATCH: "Add, pause, scan now or delete a watched folder",
    Action.DELETE_QUARANTINE: "Delete quarantined lines (of one job, or all that match the filters)",
    Action.ADD_REFERENCE: "Register a reference document (upload, or a URL the server fetches)",
    Action.REMOVE_REFERENCE: "Remove a reference document",
    Action.MANAGE_PRICES: "Add, edit, override or delete the team's prices",
    Action.MANAGE_TOKENS: "Create or revoke an API token",
    Action.MANAGE_CAPTURE_SETTINGS: "Change the capture settings (no page yet: Django admin, staff)",
    Action.MANAGE_MEMBERS: "Invite people (by e-mail or link) as admin, member or viewer, revoke an "
    "invite, change the role of or remove an admin, member or viewer",
    Action.MANAGE_OWNERS: "Invite an owner, make someone an owner, change or remove an owner "
    "(never the last one)",
    Action.LEAVE_TEAM: "Leave the team (not its last owner)",
    Action.VIEW_HEALTH: "See the health page (workers, queues, outages, the team's errors and stale leases)",
    Action.MANAGE_COUNTING: "Choose the tracked encodings and the context window; store, replace or "
    "remove the Anthropic API key for provider-exact counts",
}


def allows(role: str | None, action: Action) -> bool:
    """Whether `role` (None: not a member) may take `action`."""
    if role is None or role not in RANK:
        return False
    return RANK[Role(role)] >= RANK[MATRIX[action]]


def membership_actions(*roles: str) -> list[Action]:
    """What changing memberships that have (or get) `roles` takes: MANAGE_MEMBERS, and MANAGE_OWNERS
    as well when one of them is the owner role."""
    actions = [Action.MANAGE_MEMBERS]
    if Role.OWNER in roles:
        actions.append(Action.MANAGE_OWNERS)
    return actions


def server_edit_action(*, owned: bool, stdio: bool) -> Action:
    """What editing (or deleting) a server takes: a member's own HTTP server, else any server."""
    return Action.EDIT_OWN_SERVER if owned and not stdio else Action.EDIT_ANY_SERVER


def capabilities(role: str | None) -> dict[str, bool]:
    """Every action's answer for `role`, keyed by the action's name (the templates' `can`)."""
    return {action.value: allows(role, action) for action in Action}
