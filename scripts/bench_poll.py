"""Benchmark the poll cycle: 200 registered Streamable HTTP servers on loopback.

Reports the wall time of one full poll cycle at the configured concurrency (POLL_CONCURRENCY
threads, standing in for that many Celery worker slots), and the cost of an unchanged poll
(one sha256, a last_seen update) versus a changed one (tokenize, findings, insert rows).

Run against PostgreSQL (SQLite serializes writers and would measure its lock instead):

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/mcptax_bench .venv/bin/python scripts/bench_poll.py

Options: --servers N (200), --processes P (20 example server processes behind the N
registrations), --concurrency C (settings.POLL_CONCURRENCY), --corpus (the processes are replay
servers of the real-server captures in tests/data/servers/ instead of the two example servers;
P defaults to one per capture).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import multiprocessing
import os
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
# The benchmark's servers listen on loopback, which the outbound policy refuses unless allowed.
os.environ.setdefault("OUTBOUND_ALLOW_NETWORKS", "127.0.0.0/8")


@functools.cache
def _floor_tls() -> object:
    # Built once: a client that loaded the CA bundle on every poll would flatter the product.
    import httpx

    return httpx.create_ssl_context()


MODERN_REVISION = "2026-07-28"
META = "io.modelcontextprotocol/"
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _answer(response) -> dict:
    """A JSON-RPC answer read from a JSON body or from the last SSE `data:` line."""
    import json

    response.raise_for_status()
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
        return json.loads(data[-1])
    return response.json()


def _list_all(client, url: str, headers: dict, method: str, key: str, params: dict) -> int:
    """Every page of one listing; returns the item count."""
    count, cursor, request_id = 0, None, 2
    while True:
        body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {**params}}
        if cursor:
            body["params"]["cursor"] = cursor
        result = _answer(client.post(url, headers=headers, json=body))["result"]
        count += len(result.get(key, []))
        cursor, request_id = result.get("nextCursor"), request_id + 1
        if not cursor:
            return count


def _modern_exchange(client, url: str) -> bool:
    """The 2026-07-28 revision: `server/discover`, then every tools/list page, each request carrying
    the version envelope in `_meta`. False when the server does not speak that revision."""
    stamp = {
        "_meta": {
            META + "protocolVersion": MODERN_REVISION,
            META + "clientInfo": {"name": "floor", "version": "0"},
            META + "clientCapabilities": {},
        }
    }
    # The revision names each request's method in a header too.
    headers = {**HEADERS, "MCP-Protocol-Version": MODERN_REVISION, "Mcp-Method": "server/discover"}
    body = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": stamp}
    found = _answer(client.post(url, headers=headers, json=body)).get("result") or {}
    if MODERN_REVISION not in found.get("supportedVersions", []):
        return False
    _list_all(client, url, {**headers, "Mcp-Method": "tools/list"}, "tools/list", "tools", stamp)
    return True


def _handshake_exchange(client, url: str) -> int:
    """The handshake era: initialize, the initialized notification, every tools/list page, the
    prompts and resources the server advertises, and the session's end. Returns the tool count."""
    version = "2025-11-25"
    params = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "floor", "version": "0"}}
    first = client.post(
        url, headers=HEADERS, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}
    )
    capabilities = _answer(first)["result"].get("capabilities", {})
    session = {**HEADERS, "MCP-Protocol-Version": version}
    if "mcp-session-id" in first.headers:
        session["Mcp-Session-Id"] = first.headers["mcp-session-id"]
    client.post(url, headers=session, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    tools = _list_all(client, url, session, "tools/list", "tools", {})
    for kind in ("prompts", "resources"):
        if kind in capabilities:
            _list_all(client, url, session, f"{kind}/list", kind, {})
    if "Mcp-Session-Id" in session:
        client.delete(url, headers=session)
    return tools


def bare_poll(url: str) -> int:
    """The floor for one poll, in plain code: a bare httpx client sending the requests an unchanged
    poll sends to a server of the modern revision (the team's figures follow the handshake era, the
    default): the modern exchange first, then the handshake exchange with its listings. Returns the
    tool count. `requests_match` checks that the two send the same requests."""
    import httpx

    with httpx.Client(timeout=30, verify=_floor_tls()) as client:
        _modern_exchange(client, url)
        return _handshake_exchange(client, url)


def requests_made(work) -> list[str]:
    """The JSON-RPC methods (or HTTP methods, for a body-less request) `work()` sends, in order."""
    import json

    import httpcore

    sent: list[str] = []
    # Both clients' requests pass through httpcore's pool (httpx's client sits on it).
    original = httpcore.ConnectionPool.handle_request

    def recording(self, request):
        body = b"".join(request.stream) if request.method == b"POST" else b""
        sent.append(json.loads(body).get("method", "?") if body else request.method.decode())
        return original(self, request)

    httpcore.ConnectionPool.handle_request = recording  # type: ignore[method-assign]
    try:
        work()
    finally:
        httpcore.ConnectionPool.handle_request = original  # type: ignore[method-assign]
    return sent


# What a worker slot runs, by name, on one server's pk (set before process slots fork: they
# inherit it).
_SLOT_WORK: dict[str, Callable[[Any], Any]] = {}
FLOOR = "floor: bare httpx client"
SUBJECTS = {FLOOR: "floor", "product MCP client": "client", "unchanged poll (client + bookkeeping)": "poll"}


def _slot_task(job: tuple[str, Any]) -> tuple[Any, float]:
    name, item = job
    cpu = time.process_time()
    result = _SLOT_WORK[name](item)
    return result, time.process_time() - cpu


class _Slots:
    """``concurrency`` worker slots that live for the whole comparison, as a worker's do (what a slot
    keeps between polls, its HTTP clients and its database connection, is kept here too):
    threads of this process (the thread pool: GIL and all), or forked processes (the prefork pool,
    each slot a process of its own; CPU is then each task's own, summed)."""

    def __init__(self, kind: str, concurrency: int, threads: ThreadPoolExecutor) -> None:
        self.kind, self.concurrency, self.threads = kind, concurrency, threads
        self.pool: Any = None

    def __enter__(self) -> _Slots:
        if self.kind == "processes":
            from django.db import connections

            from mcptax.client import fasthttp

            # A forked slot must own its connections: none of this process's may be open then.
            connections.close_all()
            fasthttp.close_pools()
            self.pool = multiprocessing.get_context("fork").Pool(self.concurrency)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.pool is not None:
            self.pool.terminate()
            self.pool.join()

    def run(self, name: str, items: list[Any]) -> tuple[list[Any], Any]:
        import benchlib

        if self.pool is None:
            cpu, wall = benchlib.cpu_now(), time.perf_counter()
            results = list(self.threads.map(_SLOT_WORK[name], items))
            return results, benchlib.Measured(time.perf_counter() - wall, benchlib.cpu_now() - cpu)
        wall = time.perf_counter()
        done = self.pool.map(_slot_task, [(name, item) for item in items], chunksize=1)
        measured = benchlib.Measured(time.perf_counter() - wall, sum(cpu for _, cpu in done))
        return [result for result, _ in done], measured


def _compare(slots: _Slots, pks: list[int], rounds: int, concurrency: int) -> None:
    """Paired rounds of unchanged cycles: the floor, the product's client alone, the whole poll."""
    import benchlib

    def subject(name: str) -> Callable[[], Any]:
        def cycle() -> Any:
            results, measured = slots.run(name, pks)
            if name == "poll":
                assert not any(r.changed for r in results), "an unchanged cycle stored a snapshot"
            if name == "floor":
                assert all(results), results  # every server listed its tools
            return measured

        return cycle

    slots.run("poll", pks)  # each slot's first poll of each server: nothing timed pays for it
    runs = benchlib.paired({label: subject(name) for label, name in SUBJECTS.items()}, rounds)
    whole = "unchanged poll (client + bookkeeping)"
    benchlib.report(
        f"unchanged cycles of {len(pks)} servers, {concurrency} slots as {slots.kind}", runs, FLOOR
    )
    wall, cpu = benchlib.ratios(runs, whole, FLOOR)
    benchlib.target(f"unchanged poll / bare client, wall ({slots.kind})", wall, "<=", 1.2)
    benchlib.target(f"unchanged poll / bare client, CPU ({slots.kind})", cpu, "<=", 1.2)
    per_second = len(pks) / statistics.median(runs[whole].wall)
    benchlib.target(
        f"unchanged cycle, polls/s at concurrency {concurrency} ({slots.kind})", per_second, ">=", 40
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=200)
    parser.add_argument("--processes", type=int, default=None)
    parser.add_argument("--concurrency", type=int, default=None)
    parser.add_argument("--corpus", action="store_true", help="replay the real-server captures")
    parser.add_argument(
        "--rounds", type=int, default=5, help="paired rounds of unchanged cycles vs the floor"
    )
    parser.add_argument(
        "--slots",
        choices=["threads", "processes", "both"],
        default="both",
        help="worker slots as threads of one process (the thread pool) or as processes (prefork)",
    )
    parser.add_argument("--smoke", action="store_true", help="2 servers, 1 process, 1 round")
    args = parser.parse_args()
    if args.smoke:
        args.servers, args.processes, args.rounds = 2, 1, 1
    captures = sorted((ROOT / "tests" / "data" / "servers").glob("*.json")) if args.corpus else []
    args.processes = args.processes or (len(captures) if args.corpus else 20)

    _ensure_database(os.environ.get("DATABASE_URL", ""))
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import close_old_connections, connection

    from dashboard import outbound
    from dashboard.servers import eras
    from dashboard.servers.models import McpServer, Snapshot, Transport
    from dashboard.servers.polling import record_snapshot, target_for
    from dashboard.tasks import poll as poll_server
    from dashboard.teams.models import Team
    from examples.servers.launch import serve_http
    from mcptax import tokens
    from mcptax.client import fetch_tools_sync

    concurrency = args.concurrency or settings.POLL_CONCURRENCY
    call_command("migrate", verbosity=0)
    team, _ = Team.objects.get_or_create(slug="bench-poll", defaults={"name": "bench-poll"})
    McpServer.objects.filter(team=team).delete()

    what = f"replay servers of {len(captures)} real-server captures" if args.corpus else "example servers"
    print(
        f"database: {connection.vendor}; servers: {args.servers} registrations over {args.processes} "
        f"processes ({what}); concurrency: {concurrency}"
    )

    def launch(i: int) -> contextlib.AbstractContextManager[str]:
        if captures:
            return serve_http("replay", str(captures[i % len(captures)]))
        return serve_http("lean" if i % 2 else "sprawling")

    with contextlib.ExitStack() as stack:
        urls = [stack.enter_context(launch(i)) for i in range(args.processes)]
        servers = [
            McpServer.objects.create(
                team=team, name=f"bench-{i:03d}", transport=Transport.HTTP, url=f"{urls[i % len(urls)]}?n={i}"
            )
            for i in range(args.servers)
        ]

        def poll(pk: int):
            try:
                return poll_server(pk, trigger="bench")
            finally:
                close_old_connections()

        # The worker slots live as long as the run, as a worker's do: what a slot keeps between
        # polls (its HTTP clients, its database connection) is kept here too.
        threads = stack.enter_context(ThreadPoolExecutor(max_workers=concurrency))

        def cycle(label: str) -> list:
            t0 = time.perf_counter()
            results = list(threads.map(poll, [s.pk for s in servers]))
            wall = time.perf_counter() - t0
            outcomes = statistics.multimode([r.outcome for r in results])
            durations = sorted(r.duration_ms for r in results)
            print(
                f"{label:<28} wall {wall:6.2f} s  ({args.servers / wall:6.1f} polls/s)  "
                f"per poll p50 {durations[len(durations) // 2]} ms  p95 {durations[int(len(durations) * 0.95)]} ms  "
                f"changed {sum(r.changed for r in results)}  outcome {outcomes}"
            )
            return results

        cycle("cycle 1 (all new)")
        cycle("cycle 2 (all unchanged)")

        def client_fetch(server: McpServer) -> None:
            # The product's MCP client alone, asking as a poll asks (both eras, listings in the kept
            # answer only): what a poll spends before any bookkeeping.
            def fetch(mode: str, listings) -> object:
                return fetch_tools_sync(
                    target_for(server),
                    connect_timeout=30,
                    total_timeout=60,
                    max_bytes=settings.POLL_MAX_BYTES,
                    include_prompts_resources=listings,
                    outbound=outbound.policy(),
                    mode=mode,
                )

            kept, _ = eras.fetch_in_eras(server, fetch)
            assert kept.tools, kept

        # The floor must send what the product sends, or the ratio means nothing.
        first = McpServer.objects.select_related("team").get(pk=servers[0].pk)
        product_sends = requests_made(lambda: poll(first.pk))
        floor_sends = requests_made(lambda: bare_poll(first.url))
        print(f"requests of one unchanged poll: {', '.join(product_sends)}")
        if sorted(product_sends) != sorted(floor_sends):
            raise SystemExit(f"the floor sends other requests than the poll: {floor_sends}")
        if requests_made(lambda: client_fetch(first)) != product_sends:
            raise SystemExit("the product's client alone sends other requests than its poll")

        loaded = {s.pk: McpServer.objects.select_related("team").get(pk=s.pk) for s in servers}
        _SLOT_WORK.update(
            floor=lambda pk: bare_poll(loaded[pk].url),
            client=lambda pk: client_fetch(loaded[pk]),
            poll=poll,
        )
        kinds = ["threads", "processes"] if args.slots == "both" else [args.slots]
        for kind in kinds:
            slots = stack.enter_context(_Slots(kind, concurrency, threads))
            _compare(slots, [s.pk for s in servers], args.rounds, concurrency)
        snapshots = Snapshot.objects.filter(server__team=team)
        print(f"snapshots stored: {snapshots.count()}")
        if captures:
            taxes = sorted(snapshots.values_list("fixed_tax_tokens", flat=True))
            print(
                f"fixed tax per server: min {taxes[0]:,}  median {taxes[len(taxes) // 2]:,}  "
                f"max {taxes[-1]:,} tokens"
            )

        # The bookkeeping alone, without the network: unchanged (hash) vs changed (tokenize + rows),
        # on the largest list served.
        server = McpServer.objects.filter(team=team).order_by("-current_snapshot__fixed_tax_tokens", "pk")[0]
        result = fetch_tools_sync(
            target_for(server),
            connect_timeout=10,
            total_timeout=30,
            max_bytes=settings.POLL_MAX_BYTES,
            outbound=outbound.policy(),
        )
        n = 50
        t0 = time.perf_counter()
        for _ in range(n):
            record_snapshot(server, result)
        unchanged = (time.perf_counter() - t0) / n * 1000
        changed_times = []
        for i in range(n):
            variant = [dict(t) for t in result.tools]
            variant[0]["description"] = f"{variant[0].get('description', '')} rev {i}"
            result.tools = variant
            t0 = time.perf_counter()
            record_snapshot(server, result)
            changed_times.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        for _ in range(n):
            tokens.snapshot_sha256(result.tools)
        hash_only = (time.perf_counter() - t0) / n * 1000
        print(f"record_snapshot unchanged: {unchanged:7.2f} ms/poll (of which sha256 {hash_only:.2f} ms)")
        print(
            f"record_snapshot changed:   {statistics.median(changed_times):7.2f} ms/poll (median of {n}; "
            f"{len(result.tools)} tools)"
        )
        print(f"changed / unchanged: {statistics.median(changed_times) / unchanged:.1f}x")
    McpServer.objects.filter(team=team).delete()


def _ensure_database(url: str) -> None:
    """Create the benchmark's PostgreSQL database when it does not exist yet."""
    if not url.startswith(("postgres://", "postgresql://")):
        return
    import psycopg

    base, name = url.rsplit("/", 1)
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


if __name__ == "__main__":
    main()
