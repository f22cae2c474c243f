"""`python -m mcptax.cli`, the same as `mcp-tax`."""

from mcptax.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
