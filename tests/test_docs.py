"""Docs that cannot drift: the settings table of docs/operations.md against what config/settings.py
reads from the environment, and every Celery task name the schedule and the routes use against
the functions they name."""

from __future__ import annotations

import ast
import re
from importlib import import_module

from django.conf import settings

from tests.conftest import ROOT

ENV_READERS = {"env_str", "env_bool", "env_int", "env_float", "env_list"}


def _documented_settings() -> set[str]:
    """The variable names in the first column of the "Settings" table of docs/operations.md."""
    text = (ROOT / "docs" / "operations.md").read_text()
    match = re.search(r"^## Settings\n(.*?)(?=^## )", text, re.S | re.M)
    assert match, "docs/operations.md has no '## Settings' section"
    names: set[str] = set()
    for line in match.group(1).splitlines():
        if line.startswith("| `"):
            names.update(re.findall(r"`([A-Z][A-Z0-9_]+)`", line.split(" | ")[0]))
    return names


def _settings_read_from_the_environment() -> set[str]:
    """Every variable config/settings.py reads through config/env.py's readers."""
    tree = ast.parse((ROOT / "config" / "settings.py").read_text())
    return {
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ENV_READERS
        and node.args
        and isinstance(node.args[0], ast.Constant)
    }


def test_every_documented_setting_is_read_by_the_settings_and_every_read_one_is_documented():
    documented = _documented_settings()
    read = _settings_read_from_the_environment()
    # A removed switch is still read, only to stop the start with a message naming its successor.
    removed = {"REFERENCE_ALLOW_PRIVATE"}
    assert documented, "the settings table lists nothing"
    assert documented - read == set(), "documented in docs/operations.md but never read"
    assert read - removed - documented == set(), "read by config/settings.py but not documented"


def test_the_settings_read_the_environment_only_through_config_env():
    """One way to read the environment: no `os.environ` / `os.getenv` in config/settings.py or
    config/celery.py, and no second env library in settings.py."""
    for name in ("settings.py", "celery.py"):
        source = (ROOT / "config" / name).read_text()
        assert "os.environ.get" not in source and "os.getenv" not in source, name
    assert "import environ" not in (ROOT / "config" / "settings.py").read_text()


def _task_names() -> dict[str, str]:
    """{task name: where it is used} over beat's schedule and the routes (patterns left out)."""
    names = {entry["task"]: f"beat entry {key}" for key, entry in settings.CELERY_BEAT_SCHEDULE.items()}
    names.update({name: "route" for name in settings.CELERY_TASK_ROUTES if "*" not in name})
    return names


def test_every_scheduled_and_routed_task_name_is_the_import_path_of_its_task():
    unresolved = []
    for name, where in _task_names().items():
        module, _, attribute = name.rpartition(".")
        try:
            task = getattr(import_module(module), attribute)
        except (ImportError, AttributeError) as exc:
            unresolved.append(f"{where}: {name} ({type(exc).__name__}: {exc})")
            continue
        if getattr(task, "name", None) != name:
            unresolved.append(f"{where}: {name} is {getattr(task, 'name', task)!r}")
    assert len(_task_names()) >= 7  # five beat entries, two more routed by name
    assert unresolved == []


def test_every_route_pattern_matches_a_task_and_the_beat_tick_is_the_dispatch_setting():
    from config.celery import app

    app.loader.import_default_modules()
    registered = set(app.tasks)
    patterns = [name for name in settings.CELERY_TASK_ROUTES if "*" in name]
    for pattern in patterns:
        regex = re.compile(re.escape(pattern).replace(r"\*", ".*"))
        assert any(regex.fullmatch(name) for name in registered), pattern
    assert settings.CELERY_BEAT_SCHEDULE["dispatch-due-polls"]["schedule"] == settings.POLL_DISPATCH_EVERY
