"""`mcp-tax` (and `python -m mcptax`): argument parsing and dispatch; each subcommand's module is
imported only when that subcommand runs."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

EXIT_CODES = """exit status of measure:
  0  every server was measured and every budget holds
  1  a config's total is over --budget, or a server is over --budget-server
  2  a server could not be measured (it failed, timed out, or needs a placeholder that is not
     set), a config could not be read, or the arguments are wrong; 2 wins over 1
exit status of check: 0 pass or warn, 1 fail, 2 nothing judged (HTTP error, analysis failed)
exit status of tokens: 0 counted, 1 the file could not be read or counted"""


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not a positive number")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not a positive number")
    return value


CLIENTS = ("claude-code", "anthropic-api", "openai-tool-search", "cursor", "vscode", "codex", "opencode")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mcp-tax",
        description="Measure what MCP servers cost every request (the fixed tax), offline and exactly.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    measure = _add_measure(commands)
    _add_measure_output(measure)
    _add_measure_history(measure)
    _add_check(commands)
    _add_tokens(commands)
    return parser


def _add_measure(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """`measure`: its parser and what it measures (configs, servers, trust, timeout)."""
    measure = commands.add_parser(
        "measure",
        help="start every server of client configs at once and count their tools",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    measure.add_argument(
        "configs", nargs="*", metavar="CONFIG", help="client config files (any shape import_servers reads)"
    )
    measure.add_argument(
        "--stdio", action="append", default=[], metavar="CMD", help="a stdio server command line"
    )
    measure.add_argument(
        "--url", action="append", default=[], metavar="URL", help="a Streamable HTTP server URL"
    )
    measure.add_argument(
        "--sse", action="store_true", help="--url servers speak the older HTTP+SSE transport"
    )
    measure.add_argument(
        "--discover", action="store_true", help="also read the configs of the clients installed here"
    )
    measure.add_argument(
        "--trust",
        action="store_true",
        help="run the stdio servers of CONFIG files and project configs, and fill ${VAR} in their "
        "URLs and headers (without it only your own user-scope configs and --stdio/--url run)",
    )
    measure.add_argument(
        "--trust-commands",
        metavar="FILE",
        help="a file listing commands (one per line, e.g. npx or /usr/bin/uvx) that untrusted "
        "configs may start",
    )
    measure.add_argument(
        "--timeout", type=_positive_float, default=30.0, metavar="S", help="per server (default 30)"
    )
    return measure


def _add_measure_output(measure: argparse.ArgumentParser) -> None:
    """`measure`: how it counts and reports (encoding, profile, client, output, budgets)."""
    measure.add_argument("--encoding", default="cl100k_base", choices=["cl100k_base", "o200k_base"])
    measure.add_argument(
        "--profile",
        default=None,
        choices=["mcp", "claude", "openai", "wire"],
        help="count the tools as this client renders them (default: the --client's, else mcp: name, "
        "description, inputSchema)",
    )
    measure.add_argument(
        "--client",
        choices=CLIENTS,
        help="also show what this client sends up front in each loading mode (eager, deferred), "
        "the mode it uses, and each tool's load cost",
    )
    measure.add_argument(
        "--tool-search",
        metavar="VALUE",
        help="Claude Code's ENABLE_TOOL_SEARCH (auto, auto:N, true, false); default: the config's "
        "env, else unset (always defer); for anthropic-api and openai-tool-search: deferred or eager",
    )
    output = measure.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print JSON")
    output.add_argument("--markdown", action="store_true", help="print Markdown for a PR comment")
    measure.add_argument(
        "--budget", type=_positive_int, metavar="N", help="most fixed-tax tokens a config may total"
    )
    measure.add_argument(
        "--budget-server", type=_positive_int, metavar="N", help="most fixed-tax tokens per server"
    )
    measure.add_argument(
        "--budget-upfront",
        type=_positive_int,
        metavar="N",
        help="most tokens a config may send up front per request in its --client's mode",
    )
    measure.add_argument(
        "--context-window",
        type=_positive_int,
        default=200_000,
        metavar="N",
        help="for the share column (default 200000)",
    )


def _add_measure_history(measure: argparse.ArgumentParser) -> None:
    """`measure --history`: advice from transcripts and logs (mcptax.cli.history)."""
    measure.add_argument(
        "--history",
        nargs="+",
        metavar="PATH",
        help="Claude Code transcripts or stream-json logs, proxy envelopes or HARs (files or folders): "
        "advice from their sessions under deferred loading (keep eager, remove unused, rename after "
        "missed searches), each with its saving in tokens",
    )
    measure.add_argument(
        "--keep-eager-percent",
        type=_positive_int,
        default=50,
        metavar="P",
        help="with --history: keep eager a tool called in more than P%% of the sessions (default 50)",
    )
    measure.add_argument(
        "--unused-sessions",
        type=_positive_int,
        default=20,
        metavar="N",
        help="with --history: remove or merge a tool never loaded in the last N sessions (default 20)",
    )
    measure.add_argument(
        "--min-sessions",
        type=_positive_int,
        default=3,
        metavar="N",
        help="with --history: no advice for a server fewer than N sessions used (default 3)",
    )


def _add_check(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    check = commands.add_parser(
        "check", help="judge a tools/list with the dashboard's CI gate (POST /api/v1/check)"
    )
    check.add_argument(
        "file",
        help="tools/list result, bare array, {initialize, tools}, or a whole gate request; - for stdin",
    )
    check.add_argument("--server", required=True, help="name of the server registered in the token's team")
    check.add_argument(
        "--url", default=os.environ.get("MCP_TAX_URL"), help="the dashboard's URL (or $MCP_TAX_URL)"
    )
    check.add_argument(
        "--token", default=os.environ.get("MCP_TAX_TOKEN"), help="a team API token (or $MCP_TAX_TOKEN)"
    )
    check.add_argument("--candidate-version", help="the candidate's serverInfo.version")
    check.add_argument("--git-ref", help="branch, tag or commit, shown in the report")
    check.add_argument("--json", action="store_true", help="print the gate's whole answer as JSON")


def _add_tokens(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    tokens = commands.add_parser("tokens", help="count a saved tools/list file (as manage.py tokens)")
    tokens.add_argument("file", help="tools/list result, bare array of tools, or {initialize, tools}")
    tokens.add_argument("--encoding", default="cl100k_base")
    tokens.add_argument("--json", action="store_true", help="print the report as JSON")


def _tokens(args: argparse.Namespace) -> int:
    from mcptax.cli.tokens_file import TokensFileError, render_json, render_text, report_for_file

    try:
        report = report_for_file(args.file, args.encoding)
    except TokensFileError as exc:
        print(f"mcp-tax tokens: {exc}", file=sys.stderr)
        return 1
    print(render_json(report) if args.json else "\n".join(render_text(report)))
    return 0


def _measure(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from mcptax import loading
    from mcptax.cli import measure, render
    from mcptax.tokens import EncodingUnavailable, counter

    profile = args.profile or (loading.PRESETS[args.client].profile if args.client else "mcp")
    if args.tool_search is not None:
        if not args.client:
            parser.error("--tool-search needs --client")
        try:
            loading.parse_setting(args.client, args.tool_search)
        except loading.BadSetting as exc:
            parser.error(str(exc))

    try:
        counter(args.encoding)  # cl100k and o200k need no rank file; another encoding loads here
    except EncodingUnavailable as exc:
        print(f"mcp-tax measure: {exc}", file=sys.stderr)
        return 2
    untrusted = _trust(args)
    if untrusted is None:
        return 2
    stacks = _stacks_to_measure(args, untrusted)
    if not stacks:
        if args.discover:
            print("mcp-tax measure: no client config with MCP servers was found here", file=sys.stderr)
            return 2
        parser.error("measure needs a CONFIG, --stdio, --url or --discover")
    _say_what_runs(stacks)
    measure.measure(
        stacks,
        timeout=args.timeout,
        max_bytes=measure.DEFAULT_MAX_BYTES,
        encoding=args.encoding,
        profile=profile,
    )
    if args.client:
        measure.add_loading(
            stacks,
            args.client,
            encoding=args.encoding,
            tool_search=args.tool_search,
            context_window=args.context_window,
        )
    if args.budget_upfront is not None and not args.client:
        parser.error("--budget-upfront needs --client")
    history = _history(args, stacks)
    code = measure.judge(stacks, args.budget, args.budget_server, args.budget_upfront)
    settings = render.Settings(
        args.encoding, args.context_window, args.budget, args.budget_server, profile, args.client, history
    )
    if args.json:
        print(render.to_json(stacks, settings, code))
    elif args.markdown:
        print(render.markdown(stacks, settings))
    else:
        print(render.table(stacks, settings))
    return code


def _history(args: argparse.Namespace, stacks: list[Any]) -> Any:
    """With --history: read the files and add their advice to the stacks; the summary to print."""
    if not args.history:
        return None
    from mcptax.advice import HistoryRules
    from mcptax.cli.history import add_history, read_history

    history = read_history(args.history)
    sessions = history.sessions()
    rules = HistoryRules(args.keep_eager_percent, args.unused_sessions, args.min_sessions)
    add_history(stacks, sessions, rules, args.encoding)
    return history.report(sessions)


def _stacks_to_measure(args: argparse.Namespace, untrusted: Any) -> list[Any]:
    """The stacks the command line names: discovered client configs (a user-scope one trusted),
    CONFIG files, and the server of --stdio or --url."""
    from mcptax.cli import measure

    stacks: list[measure.StackRow] = []
    if args.discover:
        from mcptax.cli.discover import discover

        found = discover()
        names = ", ".join(f"{f.client} {f.scope} ({f.path})" for f in found) or "none"
        print(f"discovered: {names}", file=sys.stderr)
        for entry in found:
            trust = measure.TRUSTED if entry.scope == "user" else untrusted
            stacks += measure.stacks_from_file(
                entry.path, entry.client, scope=entry.scope, skip_empty=True, trust=trust
            )
    for config in args.configs:
        stacks += measure.stacks_from_file(Path(config), trust=untrusted)
    if args.stdio or args.url:
        stacks.append(measure.stack_from_command_line(args.stdio, args.url, "sse" if args.sse else "http"))
    return stacks


def _trust(args: argparse.Namespace) -> Any:
    """The trust given to CONFIG files and project configs (None after an error, printed)."""
    from mcptax.cli.measure import Trust

    commands: frozenset[str] = frozenset()
    if args.trust_commands:
        try:
            lines = Path(args.trust_commands).read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            print(f"mcp-tax measure: cannot read --trust-commands: {exc}", file=sys.stderr)
            return None
        commands = frozenset(line.strip() for line in lines if line.strip() and not line.startswith("#"))
    return Trust(everything=args.trust, commands=commands)


def _say_what_runs(stacks: list[Any]) -> None:
    """Name every command about to start and every server not started, on stderr."""
    for stack in stacks:
        for row in stack.servers:
            target = row.target
            if target is not None and target.transport == "stdio":
                print(
                    f"running: {shlex.join([target.command, *target.args])}  ({stack.name})", file=sys.stderr
                )
            elif row.reason.startswith(("not started", "not contacted")):
                print(f"skipped {row.name} ({stack.name}): {row.reason}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "tokens":
        return _tokens(args)
    if args.command == "measure":
        return _measure(args, parser)
    if not args.url or not args.token:
        parser.error("check needs --url and --token (or $MCP_TAX_URL and $MCP_TAX_TOKEN)")
    from mcptax.cli import check

    return check.run(
        args.file,
        server=args.server,
        url=args.url,
        token=args.token,
        version=args.candidate_version,
        git_ref=args.git_ref,
        as_json=args.json,
    )


def run() -> None:
    """The console script's entry point."""
    raise SystemExit(main())
