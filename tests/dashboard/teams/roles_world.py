"""A team with one user of every role and one real object of every kind a URL can name.

Built fresh for each request of the role-matrix test (tests/dashboard/teams/test_permissions.py),
so an allowed change never leaks into the next case. Objects are made through the product's own
paths where they exist (a snapshot recorded, a log ingested, a document registered, a token
issued), else with the ORM.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.contrib.auth.models import User
from django.urls import URLPattern, URLResolver, get_resolver

from dashboard.alerts.models import Alert, Budget, Level, Measure
from dashboard.alerts.notify.models import Channel, ChannelKind
from dashboard.servers.models import McpServer, Snapshot, Stack, Transport
from dashboard.teams.models import ApiToken, Invite, Membership, Team
from ingest.capture import pipeline
from ingest.capture.models import IngestJob, LineRecord, ToolCall, WatchedFolder
from ingest.fidelity import references
from ingest.fidelity.models import ModelPrice, ReferenceDocument
from tests.conftest import make_envelope_log
from tests.dashboard.alerts.factories import open_alert
from tests.dashboard.factories import record, tool

TEAM_ROLES = ("owner", "admin", "member", "viewer")
# Everyone the test tries: the four roles, a user of another team, and nobody logged in.
PRINCIPALS = (*TEAM_ROLES, "outsider", "anonymous")


@dataclass
class World:
    team: Team
    other_team: Team
    users: dict[str, User]
    # An HTTP server the member registered, one the admin registered, and a stdio server.
    own_http: McpServer
    admin_http: McpServer
    stdio: McpServer
    # A stdio server the member registered (before stdio became admin-only, or through an admin
    # who handed it over): owning it must not let the member edit a command line run on a worker.
    member_stdio: McpServer
    snapshot: Snapshot
    stack: Stack
    alert: Alert
    budget: Budget
    channel: Channel
    job: IngestJob
    line: LineRecord
    call: ToolCall
    family: str
    folder: WatchedFolder
    document: ReferenceDocument
    team_price: ModelPrice
    global_price: ModelPrice
    token: ApiToken
    token_plaintext: str
    other_token_plaintext: str
    watch_root: Path
    # Every membership of `team` by role, and "co-owner": a second owner, so that an owner may
    # leave, be demoted or be removed without taking the team's last owner.
    memberships: dict[str, Membership]
    # A pending invite as member (its token is `invite_token`), and one as owner.
    invite: Invite
    invite_token: str
    owner_invite: Invite
    extra: dict[str, Any] = field(default_factory=dict)

    def fresh(self, obj: Any) -> Any:
        """`obj` as the database holds it now, or None once deleted."""
        return type(obj).objects.filter(pk=obj.pk).first()


def _user(name: str) -> User:
    # No password: hashing one per user per case would dominate the run; the test logs in directly.
    return User.objects.create(username=name)


def _http_server(team: Team, role: str, owner: User) -> McpServer:
    return McpServer.objects.create(
        team=team,
        name=f"{role}-docs",
        transport=Transport.HTTP,
        url=f"http://127.0.0.1:9/{role}",
        headers={"Authorization": f"Bearer {role}-secret"},
        owner=owner,
    )


def _stdio_server(team: Team, name: str, owner: User) -> McpServer:
    return McpServer.objects.create(
        team=team,
        name=name,
        transport=Transport.STDIO,
        command="python",
        args=["-m", "examples.servers.lean"],
        env={"TOKEN": "stdio-secret"},
        owner=owner,
    )


def build_world(tmp_path: Path) -> World:
    team = Team.objects.create(name="Platform")
    users = {role: _user(role) for role in TEAM_ROLES}
    memberships = {
        role: Membership.objects.create(team=team, user=user, role=role) for role, user in users.items()
    }
    memberships["co-owner"] = Membership.objects.create(team=team, user=_user("co-owner"), role="owner")
    users["outsider"] = _user("outsider")
    other_team = Team.objects.create(name="Elsewhere")
    Membership.objects.create(team=other_team, user=users["outsider"], role="owner")

    own_http = _http_server(team, "member", users["member"])
    admin_http = _http_server(team, "admin", users["admin"])
    stdio = _stdio_server(team, "files", users["admin"])
    member_stdio = _stdio_server(team, "member-files", users["member"])
    snapshot = record(admin_http, [tool("read", "Read a file.")], "1.0.0")
    stack = Stack.objects.create(team=team, name="agent")
    stack.servers.set([admin_http, stdio])
    alert = open_alert(team, rule_key=f"server:{admin_http.pk}:fixed_tax_tokens").alert
    budget = Budget.objects.create(team=team, measure=Measure.FIXED_TAX_TOKENS, level=Level.ERROR, limit=3500)
    channel = Channel.objects.create(
        team=team, name="ops", kind=ChannelKind.EMAIL, config={"to": ["ops@example.com"]}
    )

    job = pipeline.ingest_bytes(
        team, make_envelope_log(calls=1, bad_lines=1), source=IngestJob.Source.UPLOAD, filename="cap.jsonl"
    )
    assert job.status == "done", job.error
    line = LineRecord.objects.filter(job=job).first()
    call = ToolCall.objects.select_related("agent").filter(job=job).first()
    assert line is not None and call is not None and call.agent is not None

    watch_root = tmp_path / "watched"
    (watch_root / "logs").mkdir(parents=True)
    folder = WatchedFolder.objects.create(team=team, path=str(watch_root / "logs"), pattern="*.jsonl")
    document, _ = references.register_upload(team, b"# runbook\n" * 200, name="runbook.md")
    team_price = ModelPrice.objects.create(
        team=team, model="team-model", agent_family="codex", input_usd_per_mtok=1, output_usd_per_mtok=2
    )
    global_price = ModelPrice.objects.filter(team=None).order_by("pk").first()
    assert global_price is not None, "the seed migration's global prices are missing"
    token, plaintext = ApiToken.issue(team, "ci")
    _, other_plaintext = ApiToken.issue(other_team, "theirs")
    invite, invite_token = Invite.issue(team, "member", days=7, created_by=users["admin"])
    owner_invite, _ = Invite.issue(team, "owner", days=7, email="boss@example.com", created_by=users["owner"])
    return World(
        team=team,
        other_team=other_team,
        users=users,
        own_http=own_http,
        admin_http=admin_http,
        stdio=stdio,
        member_stdio=member_stdio,
        snapshot=snapshot,
        stack=stack,
        alert=alert,
        budget=budget,
        channel=channel,
        job=job,
        line=line,
        call=call,
        family=call.agent.family,
        folder=folder,
        document=document,
        team_price=team_price,
        global_price=global_price,
        token=token,
        token_plaintext=plaintext,
        other_token_plaintext=other_plaintext,
        watch_root=watch_root,
        memberships=memberships,
        invite=invite,
        invite_token=invite_token,
        owner_invite=owner_invite,
    )


def url_names(patterns: list[URLPattern | URLResolver] | None = None, namespace: str = "") -> Iterator[str]:
    """Every URL pattern's name (`namespace:name`), recursing into includes."""
    for entry in get_resolver().url_patterns if patterns is None else patterns:
        if isinstance(entry, URLResolver):
            inner = ":".join(n for n in (namespace, entry.namespace) if n)
            yield from url_names(entry.url_patterns, inner)
        else:
            name = entry.name or f"<unnamed {entry.pattern}>"
            yield f"{namespace}:{name}" if namespace else name


def alert_is(state: str) -> Callable[[World, list[Any]], bool]:
    """A role-matrix effect: the world's alert is now in `state`."""
    return lambda w, _: w.fresh(w.alert).state == state


def bulk_ack(w: World) -> dict[str, Any]:
    """The bulk form's data acknowledging the world's alert."""
    return {"action": "acknowledge", "alert": [str(w.alert.code)]}
