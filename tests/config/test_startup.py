"""Start-up cost: importing the app modules loads neither the MCP SDK, nor Plotly, nor Apprise.

Each is imported where it is used (a poll, the plotly.js static file, an Apprise send), so a web
worker, `manage.py` and `mcp-tax tokens` start without them. Checked in a fresh interpreter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("mcp", "mcp_types", "plotly", "apprise")
# The modules that are the MCP client itself: they exist to use the SDK.
USES_THE_SDK = (
    "mcptax.client.fetch",
    "mcptax.client.errors",
    "mcptax.client.http",
    "mcptax.client.stdio",
    "mcptax.client.tap",
)

PROBE = """
import importlib, json, os, pkgutil, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
import django
django.setup()
skip, heavy = set(json.loads(sys.argv[1])), set(json.loads(sys.argv[2]))
imported = []
for package in ("config", "dashboard", "ingest", "mcptax"):
    root = importlib.import_module(package)
    for info in pkgutil.walk_packages(root.__path__, package + "."):
        if info.name in skip or info.name.endswith(".__main__"):
            continue
        importlib.import_module(info.name)
        imported.append(info.name)
import config.urls
print(json.dumps({"imported": imported, "loaded": sorted(m for m in sys.modules if m.split(".")[0] in heavy)}))
"""


def test_importing_every_app_module_loads_no_mcp_sdk_plotly_or_apprise():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(USES_THE_SDK), json.dumps(HEAVY)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout.splitlines()[-1])
    assert (
        "dashboard.servers.polling" in result["imported"]
        and "dashboard.alerts.notify.apprise_sender" in result["imported"]
    )
    assert "mcptax.cli.measure" in result["imported"] and "ingest.demo" in result["imported"]
    assert result["loaded"] == []


def test_mcp_tax_tokens_loads_neither_django_nor_the_mcp_sdk(tmp_path):
    path = tmp_path / "tools.json"
    path.write_text('{"tools": [{"name": "a", "inputSchema": {}}]}')
    probe = (
        "import sys\n"
        "from mcptax.cli.main import main\n"
        "assert main(['tokens', sys.argv[1]]) == 0\n"
        "print(sorted(m for m in ('django', 'mcp', 'plotly', 'apprise', 'httpx') if m in sys.modules))"
    )
    run = subprocess.run(
        [sys.executable, "-c", probe, str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[-1] == "[]"
