"""How `mcp-tax measure` names what it measured: a `--stdio` server after the package its
launcher runs, and the budget footer with its unit."""

from __future__ import annotations

import pytest

from mcptax.cli.measure import command_label, stack_from_command_line
from mcptax.cli.render import Settings, markdown, table


@pytest.mark.parametrize(
    ("command", "name"),
    [
        ("npx -y @modelcontextprotocol/server-filesystem /srv", "@modelcontextprotocol/server-filesystem"),
        ("npx -y @upstash/context7-mcp@1.0.14", "@upstash/context7-mcp"),
        ("npx --yes mcp-server-kubernetes@latest", "mcp-server-kubernetes"),
        ("uvx mcp-server-fetch", "mcp-server-fetch"),
        ("pnpm dlx @playwright/mcp", "@playwright/mcp"),
        ("python -m examples.servers.lean --transport stdio", "examples.servers.lean"),
        ("/usr/local/bin/my-server --port 3", "my-server"),
        ("npx", "npx"),
    ],
)
def test_a_stdio_server_is_named_after_the_package_it_runs(command, name):
    assert command_label(command.split()) == name
    (row,) = stack_from_command_line([command], [], "http").servers
    assert row.name == name


def test_the_budget_footer_says_tokens_per_server():
    settings = Settings(encoding="cl100k_base", context_window=200_000, budget=8_000, budget_server=500)
    footer = (
        "cl100k_base; context window 200,000 tokens; budget 8,000 tokens per config, 500 tokens per server"
    )
    assert markdown([], settings).rstrip().endswith(f"_{footer}_")
    assert footer in table([], settings)
