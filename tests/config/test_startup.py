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

import pytest

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


def cli_probe(args: list[str], modules: tuple[str, ...]) -> tuple[str, list[str]]:
    """Run `mcp-tax ARGS` in a fresh interpreter (it must exit 0): its output, and which of the
    top-level `modules` it had loaded by then."""
    probe = (
        "import json, sys\n"
        "from mcptax.cli.main import main\n"
        "assert main(json.loads(sys.argv[1])) == 0\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in json.loads(sys.argv[2]))))"
    )
    run = subprocess.run(
        [sys.executable, "-c", probe, json.dumps(args), json.dumps(modules)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    output, _, loaded = run.stdout.rstrip().rpartition("\n")
    return output, json.loads(loaded)


def test_mcp_tax_tokens_loads_neither_django_nor_the_mcp_sdk(tmp_path):
    path = tmp_path / "tools.json"
    path.write_text('{"tools": [{"name": "a", "inputSchema": {}}]}')
    output, loaded = cli_probe(["tokens", str(path)], ("django", "mcp", "plotly", "apprise", "httpx"))
    assert output.startswith("1 tools, fixed tax ")  # the figures are checked in tests/mcptax/cli
    assert loaded == []


def test_mcp_tax_measure_of_servers_of_both_eras_never_loads_the_mcp_sdk(tmp_path):
    """The fast path (mcptax.client.legacy) speaks to them itself: the SDK's 0.8 s stays unpaid."""
    from tests.mcptax.cli.support import server_entry, write_config

    config = write_config(
        tmp_path / "mcp.json",
        {"modern": server_entry("lean"), "handshake": server_entry("misbehaving", "--mode", "quirky")},
    )
    probe = ["measure", str(config), "--json", "--trust"]  # the test wrote the config
    output, loaded = cli_probe(probe, ("mcp", "mcp_types", "django", "pydantic"))
    measured = json.loads(output)
    assert [s["status"] for s in measured["stacks"][0]["servers"]] == ["ok", "ok"]
    assert loaded == []


@pytest.mark.parametrize("encoding", ["cl100k_base", "o200k_base"])
def test_counting_loads_bpe_openais_compiled_tokenizer_without_its_package(tmp_path, encoding):
    """Importing the bpe_openai package builds a model registry (over a second of start-up); the
    counting path loads only its compiled module."""
    path = tmp_path / "tools.json"
    path.write_text('{"tools": [{"name": "a", "description": "Add two numbers.", "inputSchema": {}}]}')
    output, loaded = cli_probe(["tokens", str(path), "--encoding", encoding], ("bpe_openai",))
    assert output.startswith("1 tools, fixed tax ")
    assert loaded == ["bpe_openai._bindings"]
