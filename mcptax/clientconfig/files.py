"""Reading config files: TOML, YAML (safe loader only) or JSON/JSONC told by name and text, the
client told by where a file lives, and folders of one-server block files."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path, PurePath
from typing import Any

import json5
import yaml

from mcptax.clientconfig.shapes import parse_config
from mcptax.clientconfig.types import ConfigError, SkippedEntry, StackSpec, _unknown

_YAML_SUFFIXES = (".yaml", ".yml")
# The files of a block-file folder that are read (a README or a backup beside them is not).
FOLDER_SUFFIXES = (".yaml", ".yml", ".json", ".jsonc")


def _is_yaml_name(filename: str) -> bool:
    return filename.lower().endswith(_YAML_SUFFIXES)


def _yaml(text: str) -> Any:
    try:
        # The safe loader only: a tag like !!python/object is refused, never constructed.
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        raise ConfigError(f"not valid YAML: {exc}") from exc


def _json_looking(text: str) -> bool:
    return text.lstrip("\ufeff \t\r\n").startswith(("{", "[", "//", "/*"))


def load_text(text: str, filename: str = "") -> Any:
    """Parse a config file's text: TOML for `.toml`, YAML for `.yaml`/`.yml`, else JSON (JSONC
    allowed), and YAML for a file without a telling name whose text does not look like JSON."""
    if filename.endswith(".toml"):
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"not valid TOML: {exc}") from exc
    if _is_yaml_name(filename):
        return _yaml(text)
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return json5.loads(text)
    except ValueError as exc:
        if _json_looking(text):
            raise ConfigError(f"not valid JSON or JSONC: {exc}") from exc
    data = _yaml(text)
    if not isinstance(data, dict):
        raise ConfigError("neither JSON nor YAML holding a mapping (nor TOML, which needs a .toml name)")
    return data


def client_of(filename: str) -> str | None:
    """The client a config file belongs to, told by where it lives or what it is called."""
    path = PurePath(filename.replace("\\", "/"))
    parts = {p.lower() for p in path.parts}
    name = path.name.lower()
    if ".gemini" in parts:
        return "gemini"
    if "amazonq" in parts or ".amazonq" in parts or name.startswith("amazonq"):
        return "amazon-q"
    if name.startswith("librechat") and _is_yaml_name(name):
        return "librechat"
    if name.startswith("opencode") or ".opencode" in parts:
        return "opencode"
    if ".continue" in parts:
        return "continue"
    if "goose" in parts:
        return "goose"
    return None


def parse_config_text(text: str, filename: str = "") -> list[StackSpec]:
    return parse_config(load_text(text, filename), client=client_of(filename))


def parse_config_files(files: list[tuple[str, str]]) -> list[StackSpec]:
    """One stack from a folder of one-server block files (Continue's `.continue/mcpServers/`):
    every file's servers, in file-name order. A file that cannot be read is one skipped entry."""
    stack = StackSpec("continue-folder", [])
    for filename, text in sorted(files):
        try:
            specs = parse_config_text(text, filename)
        except ConfigError as exc:
            stack.skipped.append(SkippedEntry(PurePath(filename).name, str(exc)))
            continue
        for spec in specs:
            stack.servers += spec.servers
            stack.skipped += spec.skipped
    if not stack.servers and not stack.skipped:
        raise ConfigError(_unknown("no config file in the folder"))
    return [stack]


def read_config_path(path: Path) -> list[StackSpec]:
    """A config file's stacks, or a folder of one-server block files (Continue's
    `.continue/mcpServers/`) read as one stack. OSError and UnicodeDecodeError pass through."""
    if path.is_dir():
        files = [
            (str(p), p.read_text(encoding="utf-8"))
            for p in sorted(path.iterdir())
            if p.is_file() and p.name.lower().endswith(FOLDER_SUFFIXES)
        ]
        return parse_config_files(files)
    return parse_config_text(path.read_text(encoding="utf-8"), str(path))
