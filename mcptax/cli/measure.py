"""`mcp-tax measure`: the fixed tax of every server of one or more client configs, measured live.

Every server of every config starts at once (one task each, all under one event loop), each
bounded by its own timeout; the same server listed in several configs is measured once. Figures
are the product's own (:func:`mcptax.tokens.account`: all `tools/list` pages, `encode_ordinary`).
"""

from __future__ import annotations

import contextlib
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcptax import tokens
from mcptax.advice import Advice
from mcptax.cli.placeholders import Unresolved, environment, resolve_all
from mcptax.client.target import PollError, ServerTarget
from mcptax.clientconfig import ConfigError, ServerSpec, StackSpec, read_config_path
from mcptax.loading import StackLoading

OK, FAILED, NOT_MEASURABLE, DISABLED = "ok", "failed", "not_measurable", "disabled"
# An entry of the config that is no server to start (a Goose builtin, a malformed entry): listed
# with the reason, never counted as a failure to measure.
SKIPPED = "skipped"
DEFAULT_TIMEOUT = 30.0
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
DEFAULT_CONTEXT_WINDOW = 200_000
# Folders a client keeps a project's config in: the project is the folder that holds them.
_CONFIG_DIRS = {
    ".vscode",
    ".cursor",
    ".gemini",
    ".kiro",
    ".roo",
    ".codex",
    ".zed",
    "settings",
    ".continue",
    "mcpServers",
    ".amazonq",
    ".opencode",
}


@dataclass
class ServerRow:
    name: str
    transport: str
    status: str = OK
    reason: str = ""
    outcome: str | None = None
    tools: int = 0
    fixed_tax_tokens: int = 0
    instructions_tokens: int = 0
    server_name: str | None = None
    server_version: str | None = None
    pages: int = 0
    elapsed_seconds: float = 0.0
    over_budget: bool = False
    always_load: bool = False
    target: ServerTarget | None = field(default=None, repr=False)
    # What the server listed, kept for the loading-mode figures (computed per stack).
    listed: list[dict[str, Any]] = field(default_factory=list, repr=False)
    instructions: str | None = field(default=None, repr=False)


@dataclass
class StackRow:
    """One stack: the servers one agent loads (a config file, or one project scope of it)."""

    source: str
    client: str | None
    name: str
    servers: list[ServerRow] = field(default_factory=list)
    error: str | None = None
    over_budget: bool = False
    tool_search: str | None = None  # the config's ENABLE_TOOL_SEARCH, when it sets one
    loading: StackLoading | None = None
    advice: list[Advice] = field(default_factory=list)

    def measured(self) -> list[ServerRow]:
        return [s for s in self.servers if s.status == OK]

    def fixed_tax_tokens(self) -> int:
        return sum(s.fixed_tax_tokens for s in self.measured())

    def instructions_tokens(self) -> int:
        return sum(s.instructions_tokens for s in self.measured())

    def tools(self) -> int:
        return sum(s.tools for s in self.measured())

    def unmeasured(self) -> list[ServerRow]:
        return [s for s in self.servers if s.status in (FAILED, NOT_MEASURABLE)]


def project_dir(path: Path) -> Path:
    """The project a config file belongs to (`.vscode/mcp.json` belongs to the folder above)."""
    folder = path.parent
    while folder.name in _CONFIG_DIRS and folder.parent != folder:
        folder = folder.parent
    return folder


def target_for(spec: ServerSpec, env: dict[str, str], workspace: Path | None) -> ServerTarget:
    """The server as its client would start it here; Unresolved when a placeholder cannot be filled.

    A stdio server gets this process's environment with the config's `env` over it, as Claude Code
    and the editors start them; a relative `cwd` is taken from the project folder.
    """
    if spec.transport == "stdio":
        server_env = resolve_all(spec.env, env, workspace)
        cwd = resolve_all(spec.cwd, env, workspace) if spec.cwd else None
        if cwd and workspace is not None and not Path(cwd).is_absolute():
            cwd = str(workspace / cwd)
        return ServerTarget(
            "stdio",
            command=resolve_all(spec.command, env, workspace),
            args=resolve_all(spec.args, env, workspace),
            env={**env, **server_env},
            cwd=cwd,
        )
    return ServerTarget(
        "http" if spec.transport == "http" else "sse",
        url=resolve_all(spec.url, env, workspace),
        headers=resolve_all(spec.headers, env, workspace),
    )


@dataclass(frozen=True)
class Trust:
    """Whether a config's servers may run here. A config from a repository (a pull request's
    `.mcp.json`, a freshly cloned project) is not the user's: starting its stdio servers runs its
    commands, and filling `${VAR}` in its URLs and headers sends this machine's secrets to its
    hosts. ``everything``: `--trust`; ``commands``: commands the user listed as safe to run."""

    everything: bool = False
    commands: frozenset[str] = frozenset()

    def refusal(self, spec: ServerSpec) -> str | None:
        """Why the untrusted config's server is not started (what it would run), or None."""
        if self.everything:
            return None
        if spec.transport == "stdio":
            if spec.command in self.commands or Path(spec.command).name in self.commands:
                return None
            would = shlex.join([spec.command, *spec.args])
            return (
                f"not started: it would run `{would}` from a config that is not yours; "
                "pass --trust, or list the command in --trust-commands"
            )
        fields = [spec.url, *spec.headers.values()]
        if any("${" in value for value in fields):
            return (
                "not contacted: it would send values of your environment (${...} in its URL or "
                "headers) to a host a config that is not yours names; pass --trust"
            )
        return None


TRUSTED = Trust(everything=True)


def _rows(
    stack: StackSpec, env: dict[str, str], workspace: Path | None, trust: Trust = TRUSTED
) -> list[ServerRow]:
    rows = []
    for spec in stack.servers:
        row = ServerRow(spec.name, spec.transport, always_load=spec.always_load)
        if spec.disabled:
            row.status = DISABLED
            row.reason = (spec.disabled_reason or "disabled in the config") + "; not started"
        elif refused := trust.refusal(spec):
            row.status, row.reason = NOT_MEASURABLE, refused
        else:
            try:
                row.target = target_for(spec, env, workspace)
            except Unresolved as exc:
                row.status, row.reason = NOT_MEASURABLE, str(exc)
        rows.append(row)
    rows += [ServerRow(s.name, "-", status=SKIPPED, reason=s.reason) for s in stack.skipped]
    return rows


def stacks_from_file(
    path: Path,
    client: str | None = None,
    *,
    scope: str = "",
    skip_empty: bool = False,
    trust: Trust = TRUSTED,
) -> list[StackRow]:
    """The stacks of a config file; an unreadable file is one stack carrying the error.

    `client` and `scope` label each stack (discovery's "Claude Code", "user"): a project's own list
    inside a user-scope file (Claude Code's ~/.claude.json `projects.<path>`) is that project's
    local scope, not the user's."""
    if client and scope:
        client = f"{client}, {scope}"
    source = str(path)
    try:
        parsed = read_config_path(path)
    except (OSError, UnicodeDecodeError) as exc:
        return [StackRow(source, client, source, error=f"cannot read {source}: {exc}")]
    except ConfigError as exc:
        if skip_empty:
            return []
        return [StackRow(source, client, source, error=f"{source}: {exc}")]
    env = environment()
    stacks = []
    for stack in parsed:
        if skip_empty and not stack.servers:
            continue
        folder = path.resolve() / "_" if path.is_dir() else path.resolve()
        workspace = Path(stack.scope) if stack.scope else project_dir(folder)
        name = f"project {stack.scope}" if stack.scope else source
        label = client.rsplit(", ", 1)[0] + ", local" if client and scope and stack.scope else client
        rows = _rows(stack, env, workspace, trust)
        stacks.append(StackRow(source, label, name, rows, tool_search=stack.tool_search))
    return stacks


# Commands that fetch and run a package: the server is the package, not the launcher.
LAUNCHERS = {"npx", "pnpx", "bunx", "uvx", "pipx", "deno"}
LAUNCHER_VERBS = {"run", "dlx", "exec", "x"}


def command_label(argv: list[str]) -> str:
    """A server's name from its command line: the package a launcher runs (`npx -y
    @scope/server@1.2` -> `@scope/server`), the module of `python -m`, else the program's name."""
    program = Path(argv[0]).name
    rest = argv[1:]
    if program.startswith("python") and "-m" in rest[:-1]:
        return rest[rest.index("-m") + 1]
    if program in LAUNCHERS or program in {"pnpm", "yarn", "bun"}:
        words = [a for a in rest if not a.startswith("-") and a not in LAUNCHER_VERBS]
        if words:
            package = words[0]
            # A version pin is not part of the name; a scope's own "@" is.
            name, at, _ = package.rpartition("@")
            return name if at and name else package
    return program


def stack_from_command_line(stdio: list[str], urls: list[str], url_transport: str) -> StackRow:
    """`--stdio CMD` and `--url URL` servers, as one stack named "command line"."""
    stack = StackRow("command line", None, "command line")
    for command in stdio:
        argv = shlex.split(command)
        if not argv:
            stack.error = "--stdio needs a command"
            continue
        row = ServerRow(command_label(argv), "stdio")
        row.target = ServerTarget("stdio", command=argv[0], args=argv[1:], env=environment())
        stack.servers.append(row)
    for url in urls:
        row = ServerRow(url, url_transport)
        row.target = ServerTarget("http" if url_transport == "http" else "sse", url=url)
        stack.servers.append(row)
    return stack


def _key(target: ServerTarget) -> str:
    return tokens.canonical(
        [target.transport, target.command, target.args, target.env, target.cwd, target.url, target.headers]
    )


async def _fetch_one(target: ServerTarget, timeout: float, max_bytes: int, process: Any = None) -> Any:
    from mcptax.client.fetch import fetch_tools  # the MCP SDK: only a measurement needs it
    from mcptax.outbound import OutboundPolicy

    # The developer's own machine and configs: local and private addresses are theirs to reach.
    anywhere = OutboundPolicy.from_entries(["0.0.0.0/0", "::/0"])
    try:
        return await fetch_tools(
            target,
            connect_timeout=timeout,
            total_timeout=timeout,
            max_bytes=max_bytes,
            include_prompts_resources=False,
            outbound=anywhere,
            process=process,
            stdin_grace=0.0,  # the answer is in: stop the server now, it has nothing left to save
        )
    except PollError as exc:
        return exc
    except Exception as exc:  # noqa: BLE001 - one server's failure must not lose the others
        return PollError("internal_error", f"{type(exc).__name__}: {exc}")


async def _fetch_handshake_era(process: Any, timeout: float, max_bytes: int) -> Any:
    """The result without the SDK, a PollError, or None when the SDK must ask this server."""
    from mcptax.client.legacy import fetch_handshake_era

    try:
        return await fetch_handshake_era(process, timeout=timeout, max_bytes=max_bytes)
    except PollError as exc:
        return exc
    except Exception as exc:  # noqa: BLE001 - one server's failure must not lose the others
        return PollError("internal_error", f"{type(exc).__name__}: {exc}")


async def _load_encoding(encoding: str) -> None:
    import anyio.to_thread

    # An encoding that cannot load is reported where it is used, with the figures it would give.
    # The counter of cl100k and o200k is the compiled tokenizer's: tiktoken's rank file (a tenth
    # of a second of CPU) is read only for another encoding.
    with contextlib.suppress(tokens.EncodingUnavailable):
        await anyio.to_thread.run_sync(tokens.counter, encoding)


def measure(
    stacks: list[StackRow], *, timeout: float, max_bytes: int, encoding: str, profile: str = "mcp"
) -> None:
    """Fill every stack's rows in place, all servers concurrently."""
    import anyio

    from mcptax.client.spawn import start_server
    from mcptax.procgroup import stop_process_group_async, untrack_group

    targets: dict[str, ServerTarget] = {}
    for stack in stacks:
        for row in stack.servers:
            if row.target is not None:
                targets.setdefault(_key(row.target), row.target)
    results: dict[str, Any] = {}
    started: dict[str, Any] = {}

    async def run_one(key: str, target: ServerTarget) -> None:
        process = started.get(key)
        if process is None:
            results[key] = await _fetch_one(target, timeout, max_bytes)
            return
        began = anyio.current_time()
        quick = await _fetch_handshake_era(process, timeout, max_bytes)
        if quick is not None:
            results[key] = quick
            return
        # Not a server of the handshake era, or it did something only the SDK may judge: asked
        # again, from the start, through the SDK, within what is left of its timeout.
        left = timeout - (anyio.current_time() - began)
        if left <= 0:
            results[key] = PollError("timeout", f"no answer within the timeout ({timeout:g} s)")
            return
        try:
            started[key] = await start_server(target, target.env)
        except PollError as exc:
            results[key] = exc
            return
        results[key] = await _fetch_one(target, left, max_bytes, started[key])

    async def run_all() -> None:
        # Every stdio server is started first, then asked without the SDK (mcptax.client.legacy);
        # the SDK loads only for a server that needs it. Each target's env is this process's
        # environment with the config's over it (target_for), as its client would start it.
        for key, target in targets.items():
            if target.transport == "stdio":
                try:
                    started[key] = await start_server(target, target.env)
                except PollError as exc:
                    results[key] = exc
        try:
            async with anyio.create_task_group() as group:
                # The tokenizer's rank file loads in a thread while the servers are being asked.
                group.start_soon(_load_encoding, encoding)
                for key, target in targets.items():
                    if key not in results:
                        group.start_soon(run_one, key, target)
        finally:
            # A fetch stops and reaps its own server; one that failed before it got there must not
            # outlive the command.
            for process in started.values():
                if process.returncode is None:
                    with anyio.CancelScope(shield=True):
                        await stop_process_group_async(process, term_grace=1.0, kill_grace=2.0)
                untrack_group(process.pid)

    if targets:
        anyio.run(run_all)
    for stack in stacks:
        for row in stack.servers:
            if row.target is not None:
                _fill(row, results[_key(row.target)], encoding, profile)


def _fill(row: ServerRow, result: Any, encoding: str, profile: str = "mcp") -> None:
    if isinstance(result, PollError):
        row.status, row.outcome, row.reason = FAILED, result.outcome, result.message
        return
    from mcptax import profiles

    report = profiles.account(
        result.tools, result.instructions, profile=profile, encoding=encoding, server=row.name
    )
    row.tools = report.tool_count
    row.fixed_tax_tokens = report.fixed_tax_tokens
    row.instructions_tokens = report.instructions_tokens
    row.server_name, row.server_version = result.server_name, result.server_version
    row.pages, row.elapsed_seconds = result.pages, result.elapsed_seconds
    row.listed, row.instructions = result.tools, result.instructions


def add_loading(
    stacks: list[StackRow], client: str, *, encoding: str, tool_search: str | None, context_window: int
) -> None:
    """Each stack's loading-mode figures under `client` (mcptax.loading) and the advice its servers'
    own tools give. `tool_search` (the command line's) wins over a config's ENABLE_TOOL_SEARCH."""
    from mcptax import advice, loading

    for stack in stacks:
        if stack.error:
            continue
        measured = stack.measured()
        servers = [loading.ServerTools(r.name, r.listed, r.instructions, r.always_load) for r in measured]
        setting = tool_search if tool_search is not None else stack.tool_search
        if client != "claude-code":
            setting = None
        stack.loading = loading.stack_figures(
            servers, client, encoding=encoding, setting=setting, context_window=context_window
        )
        for row, figures in zip(measured, stack.loading.servers, strict=True):
            stack.advice += advice.instructions_advice(figures, row.instructions, encoding)


def judge(
    stacks: list[StackRow], budget: int | None, budget_server: int | None, budget_upfront: int | None = None
) -> int:
    """Mark what is over budget; the exit code: 2 if anything could not be measured, else 1 if
    anything is over budget, else 0. `budget_upfront` bounds each stack's upfront tokens per
    request in the mode its --client uses."""
    over = False
    unmeasured = False
    for stack in stacks:
        unmeasured |= stack.error is not None or bool(stack.unmeasured())
        if budget is not None and stack.fixed_tax_tokens() > budget:
            stack.over_budget = over = True
        if (
            budget_upfront is not None
            and stack.loading is not None
            and stack.loading.upfront > budget_upfront
        ):
            stack.over_budget = over = True
        for row in stack.measured():
            if budget_server is not None and row.fixed_tax_tokens > budget_server:
                row.over_budget = over = True
    return 2 if unmeasured else 1 if over else 0
