"""The ``mcp-tax`` command line (``python -m mcptax``): measure, check, tokens. No Django.

Each subcommand imports what it needs when it runs, so ``mcp-tax tokens FILE`` never pays for
the MCP SDK and ``mcp-tax check`` needs only httpx.
"""
