"""Command line: `python -m mcptax.proxy --server-label NAME (--log FILE | --push URL) ...`.

    stdio:  python -m mcptax.proxy --server-label fs --log fs.jsonl -- npx some-server
    http:   python -m mcptax.proxy --server-label fs --log fs.jsonl --listen 127.0.0.1:7000 \\
                --upstream http://127.0.0.1:8000/mcp
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from collections.abc import Sequence
from types import FrameType

from mcptax.proxy.push import DEFAULT_DRAIN_TIMEOUT, DEFAULT_MAX_BUFFER_BYTES, PushSink
from mcptax.proxy.writer import PROXY_NAME, PROXY_VERSION, EnvelopeWriter, FileSink, Sink, new_session_id

# Signals a supervisor sends to stop the proxy (the SDK's stdio client SIGTERMs the whole process
# group when the server has not exited 2 s after its stdin closed).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def _ignore(_signum: int, _frame: FrameType | None) -> None:
    pass


def _stop(signum: int, _frame: FrameType | None) -> None:
    # The first stop signal stops the proxy; the ones after it must not cut the drain short.
    for other in STOP_SIGNALS:
        signal.signal(other, _ignore)
    raise SystemExit(128 + signum)  # unwinds through the writer's close, so the log is drained


def stop_signals_drain_the_log() -> None:
    """A stop signal never kills the proxy with frames still unwritten.

    Before the relay starts, it stops the proxy through `SystemExit`, which drains the log. Once
    the relay runs, the relay's own handlers take over (stdio passes the signal on to the server,
    HTTP stops serving) and stay in place until the process exits, so a signal that arrives while
    the proxy is already on its way out has nothing left to do.
    """
    for signum in STOP_SIGNALS:
        signal.signal(signum, _stop)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROXY_NAME,
        description="Relay MCP traffic unchanged and log every frame as envelope JSONL.",
        epilog="stdio mode: put the server command after `--`. HTTP mode: --listen and --upstream.",
    )
    parser.add_argument("--server-label", required=True, help="name for this server in the log")
    parser.add_argument("--log", metavar="FILE", help="append envelopes to FILE (JSONL)")
    parser.add_argument("--push", metavar="URL", help="also POST envelopes to the dashboard's /api/v1/ingest")
    parser.add_argument(
        "--token", default=os.environ.get("MCP_TAX_TOKEN"), help="API token for --push (or $MCP_TAX_TOKEN)"
    )
    parser.add_argument(
        "--hash-only",
        action="store_true",
        help="log bulk strings as {sha256, bytes, lines, tokens} digests instead of their content",
    )
    parser.add_argument("--listen", metavar="HOST:PORT", help="HTTP mode: address to listen on")
    parser.add_argument("--upstream", metavar="URL", help="HTTP mode: the server's Streamable HTTP endpoint")
    parser.add_argument(
        "--push-buffer-bytes", type=int, default=DEFAULT_MAX_BUFFER_BYTES, help=argparse.SUPPRESS
    )
    parser.add_argument(
        "--push-drain-timeout", type=float, default=DEFAULT_DRAIN_TIMEOUT, help=argparse.SUPPRESS
    )
    parser.add_argument("--version", action="version", version=f"{PROXY_NAME} {PROXY_VERSION}")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the proxy; returns the exit status (the server's own in stdio mode)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    # Everything after the first `--` is the server command, passed through untouched.
    if "--" in args_list:
        split = args_list.index("--")
        own_args, command = args_list[:split], args_list[split + 1 :]
    else:
        own_args, command = args_list, []
    parser = build_parser()
    args = parser.parse_args(own_args)

    http_mode = bool(args.listen or args.upstream)
    if http_mode and not (args.listen and args.upstream):
        parser.error("HTTP mode needs both --listen and --upstream")
    if http_mode and command:
        parser.error("give either a command after `--` (stdio) or --listen/--upstream (HTTP), not both")
    if not http_mode and not command:
        parser.error("no server command: put it after `--`, or use --listen/--upstream")
    if not args.log and not args.push:
        parser.error("nothing to log to: give --log FILE and/or --push URL")
    if args.push and not args.token:
        # Checked now: without a token every batch would be refused and lost at exit.
        parser.error("--push needs an API token: give --token or set MCP_TAX_TOKEN")
    if http_mode:
        from mcptax.proxy.http import parse_listen

        try:
            parse_listen(args.listen)
        except ValueError as exc:
            parser.error(str(exc))

    sinks: list[Sink] = []
    if args.log:
        sinks.append(FileSink(args.log))
    if args.push:
        sinks.append(
            PushSink(
                args.push,
                args.token,
                max_buffer_bytes=args.push_buffer_bytes,
                drain_timeout=args.push_drain_timeout,
            )
        )
    writer = EnvelopeWriter(
        args.server_label, "http" if http_mode else "stdio", sinks, hash_only=args.hash_only
    )
    session_id = new_session_id()
    stop_signals_drain_the_log()
    return _relay(args, command, http_mode, writer, session_id)


def _relay(
    args: argparse.Namespace, command: list[str], http_mode: bool, writer: EnvelopeWriter, session_id: str
) -> int:
    try:
        if http_mode:
            from mcptax.proxy.http import ListenError, run_http

            try:
                return run_http(args.listen, args.upstream, writer, session_id)
            except ListenError as exc:
                print(f"{PROXY_NAME}: error: {exc}", file=sys.stderr)
                return 2
        from mcptax.proxy.stdio import run_stdio

        return run_stdio(command, writer, session_id)
    finally:
        writer.close()


def exit_now(status: int) -> None:
    """Leave without the interpreter's shutdown, which puts the default handlers back: a stop
    signal arriving then would kill the proxy (status -15) after a clean run. Everything the
    proxy owes is written by now: the relay writes straight to the file descriptors and the log
    is drained."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(status)


def run() -> None:
    """The `mcp-tax-proxy` command."""
    try:
        status = main()
    except SystemExit as stop:  # a stop signal before the relay, or a command-line error
        if not isinstance(stop.code, int | None):
            raise
        status = stop.code or 0
    exit_now(status)


if __name__ == "__main__":
    run()
