"""The discovery derivations: searches, misses, loads, wasted loads, calls without a load, carried tokens."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from mcptax.discovery import (
    Compaction,
    RequestTurn,
    ToolSearch,
    ToolUse,
    derive,
    missed_before_call,
    select_names,
)

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def at(n: int) -> datetime:
    return T0 + timedelta(seconds=n)


ECHO, ADD, GREP = "mcp__echo__echo", "mcp__calc__add", "mcp__files__grep"


def search(key: str, n: int, *matches: str, query: str = "q") -> ToolSearch:
    return ToolSearch(key, at(n), query, matches, 12, "ToolSearch")


def test_a_session_with_a_miss_a_wasted_load_and_a_compaction() -> None:
    events = [
        RequestTurn("r1", at(0)),
        search("s1", 1, ECHO, ADD, query="select:mcp__echo__echo,mcp__calc__add"),
        RequestTurn("r2", at(2)),
        ToolUse("c1", at(3), ECHO),
        search("s2", 4, query="weather forecast"),  # a miss
        RequestTurn("r3", at(5)),
        Compaction("k1", at(6), (ECHO,)),  # add is dropped, echo stays loaded
        RequestTurn("r4", at(7)),
        search("s3", 8, ECHO, ADD),  # echo still loaded: only add loads again
        RequestTurn("r5", at(9)),
        ToolUse("c2", at(10), ADD),
        ToolUse("c3", at(11), GREP),  # never loaded: eager
    ]
    derived = derive(events)
    assert derived.counts() == {
        "searches": 3,
        "misses": 1,
        "loads": 3,
        "loads_never_called": 1,
        "calls": 3,
        "calls_without_load": 1,
        "requests": 5,
    }
    echo, add_first, add_again = derived.loads
    assert (echo.tool, echo.search_key, echo.called, echo.requests_after) == (ECHO, "s1", 1, 4)
    # add: loaded by s1, carried in r2 and r3, dropped by the compaction before r4, never called
    assert (add_first.tool, add_first.called, add_first.requests_after, add_first.dropped_by) == (
        ADD,
        0,
        2,
        "k1",
    )
    assert (add_again.search_key, add_again.called, add_again.requests_after) == ("s3", 1, 1)
    assert [c.tool for c in derived.calls_without_load] == [GREP]
    assert derived.load_to_call_rate == 2 / 3
    assert derived.total_deferred == 12
    # echo 100 x 4 requests + add 40 x (2 + 1)
    assert derived.carried_tokens({ECHO: 100, ADD: 40}) == 520


def test_repeated_records_count_once_and_undated_sessions_go_by_log_position() -> None:
    events = [
        ToolUse("c1", at(5), ECHO, seq=1),
        ToolSearch("s1", at(1), "q", (ECHO,), None, "ToolSearch", seq=2),
        ToolSearch("s1", at(1), "q", (ECHO,), None, "ToolSearch", seq=2),
        RequestTurn("r1", None, seq=3),
        RequestTurn("r1", None, seq=3),
    ]
    derived = derive(events)
    assert derived.counts()["searches"] == 1
    assert derived.counts()["requests"] == 1
    # with an undated record in the session, log position alone orders it: the call came first
    assert derived.loads[0].called == 0
    assert [c.tool for c in derived.calls_without_load] == [ECHO]
    assert derived.loads[0].requests_after == 1


def test_no_loads_means_no_rate() -> None:
    assert derive([ToolUse("c", at(0), ECHO)]).load_to_call_rate is None


def test_select_names() -> None:
    assert select_names("select:mcp__a__x, mcp__b__y") == ("mcp__a__x", "mcp__b__y")
    assert select_names("slack message") == ()


def test_misses_followed_by_a_call_of_the_servers_tool() -> None:
    derived = derive(
        [
            search("s1", 1, query="post to channel"),
            search("s2", 2, "mcp__slack__send_message", query="select:mcp__slack__send_message"),
            ToolUse("c1", at(3), "mcp__slack__send_message"),
            search("s3", 4, query="never followed"),
        ]
    )
    servers = {"mcp__slack__send_message": "slack"}
    assert missed_before_call(derived, servers) == {"slack": ["post to channel"]}


def test_dated_sessions_go_by_time_then_position() -> None:
    events = [
        ToolUse("c1", at(5), ECHO, seq=1),
        ToolSearch("s1", at(1), "q", (ECHO,), None, "ToolSearch", seq=2),
        RequestTurn("r1", at(3), seq=3),
    ]
    derived = derive(events)
    assert (derived.loads[0].called, derived.loads[0].requests_after) == (1, 1)
    assert derived.calls_without_load == []
