"""`python -m mcptax`: the `mcp-tax` command line (see mcptax/cli/)."""

from mcptax.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
