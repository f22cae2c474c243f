"""Resolving a client config's `${...}` placeholders for a measurement, on this machine only.

The importer keeps placeholders as written (resolving them would copy secrets into the dashboard);
measuring runs the server here, as the client would, so each placeholder is resolved the way the
clients resolve it, and a server whose placeholder cannot be resolved is not measured:

- `${VAR}`, `${env:VAR}` (VS Code, Cursor), `${VAR:-default}` (Claude Code): the environment;
- `${workspaceFolder}` (VS Code, Cursor): the project the config belongs to;
- `${userHome}`: the home directory;
- `{env:VAR}` (opencode): the environment;
- anything else (`${input:...}` that VS Code prompts for, `${command:...}`, Continue's
  `${{ secrets.X }}`, opencode's `{file:...}`) cannot be resolved outside the client.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

_PLACEHOLDER = re.compile(r"\$\{([^}]+)\}")
_OPENCODE_ENV = re.compile(r"(?<!\$)\{env:([^}]+)\}")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class Unresolved(Exception):
    """A placeholder this machine cannot fill; the message names it and why."""


def resolve(text: str, env: Mapping[str, str], workspace: Path | None) -> str:
    def fill(match: re.Match[str]) -> str:
        inner = match.group(1)
        if inner == "workspaceFolder":
            if workspace is None:
                raise Unresolved("${workspaceFolder}: this config belongs to no project folder")
            return str(workspace)
        if inner == "userHome":
            return str(Path.home())
        name, default = inner, None
        if name.startswith("env:"):
            name = name[4:]
        elif ":-" in name:
            name, default = name.split(":-", 1)
        if not _NAME.match(name):
            raise Unresolved(
                f"${{{inner}}}: only the client itself can fill this placeholder (it prompts or "
                "runs a command for it); put the value in the environment and write ${VAR} instead"
            )
        if name in env:
            return env[name]
        if default is not None:
            return default
        raise Unresolved(f"${{{inner}}}: environment variable {name} is not set")

    def fill_opencode(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in env:
            raise Unresolved(f"{{env:{name}}}: environment variable {name} is not set")
        return env[name]

    return _OPENCODE_ENV.sub(fill_opencode, _PLACEHOLDER.sub(fill, text))


def resolve_all(value: Any, env: Mapping[str, str], workspace: Path | None) -> Any:
    """`value` (a string, a list or a dict of strings) with every placeholder resolved."""
    if isinstance(value, str):
        return resolve(value, env, workspace)
    if isinstance(value, list):
        return [resolve_all(v, env, workspace) for v in value]
    if isinstance(value, dict):
        return {k: resolve_all(v, env, workspace) for k, v in value.items()}
    return value


def environment() -> dict[str, str]:
    return dict(os.environ)
