"""`mcp-tax tokens FILE` and `manage.py tokens FILE`: one function, the same output, exact figures."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.helpers import compact
from tests.mcptax.cli.support import CL100K, ROOT, mcp_tax

CAPTURE = ROOT / "tests" / "data" / "servers" / "notion@2.5.2.json"


def _manage(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args], capture_output=True, text=True, cwd=ROOT, timeout=120
    )


def test_tokens_counts_a_real_capture_exactly():
    run = mcp_tax("tokens", str(CAPTURE), "--json")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    tools = json.loads(CAPTURE.read_text())["tools"]
    visible = [{k: t[k] for k in ("name", "description", "inputSchema") if k in t} for t in tools]
    assert report["fixed_tax_tokens"] == len(CL100K.encode_ordinary(compact(visible)))
    assert report["tool_count"] == len(tools)


def test_mcp_tax_tokens_and_manage_py_tokens_print_the_same(tmp_path):
    endoftext = tmp_path / "tools.json"
    endoftext.write_text(
        json.dumps({"tools": [{"name": "e", "description": "a <|endoftext|> b", "inputSchema": {}}]})
    )
    for path in (CAPTURE, endoftext):
        for extra in ([], ["--json"]):
            ours, django = mcp_tax("tokens", str(path), *extra), _manage("tokens", str(path), *extra)
            assert ours.returncode == django.returncode == 0, ours.stderr + django.stderr
            assert ours.stdout == django.stdout
    # Through Django's own command machinery (a Django option is given), the same text again.
    through_django = _manage("tokens", str(CAPTURE), "--verbosity", "1")
    assert through_django.stdout == mcp_tax("tokens", str(CAPTURE)).stdout


def test_a_bad_file_is_a_clear_error_with_exit_1(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    for run in (mcp_tax("tokens", str(bad)), _manage("tokens", str(bad))):
        assert run.returncode == 1
        assert f"{bad}: not valid JSON" in run.stderr
    missing = mcp_tax("tokens", str(tmp_path / "none.json"))
    assert missing.returncode == 1 and "no such file" in missing.stderr
