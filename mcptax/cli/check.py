"""`mcp-tax check FILE --server NAME --url DASHBOARD --token T`: the dashboard's CI gate, over HTTP.

Sends FILE to `POST /api/v1/check` with the team's API token and exits with the gate's verdict,
as `manage.py check_budget` does: 0 pass (or warn), 1 fail, 2 when nothing was judged (an HTTP
error, an unreachable dashboard, a file that is not JSON, or an analysis that failed).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, TextIO

CHECK_PATH = "/api/v1/check"
TIMEOUT_SECONDS = 60.0


class CheckError(Exception):
    """Nothing was judged; the message says why."""


def endpoint(url: str) -> str:
    """The gate's URL from the dashboard's base URL (a full `.../api/v1/check` is kept as given)."""
    url = url.rstrip("/")
    return url if url.endswith(CHECK_PATH) else url + CHECK_PATH


def request_body(
    text: str, server: str, version: str | None = None, git_ref: str | None = None
) -> dict[str, Any]:
    """The gate's request: FILE is a tools document, or already a whole request body."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CheckError(f"not valid JSON ({exc})") from None
    body: dict[str, Any] = (
        dict(data) if isinstance(data, dict) and "tools_list" in data else {"tools_list": data}
    )
    body["server"] = server
    if version:
        body["version"] = version
    if git_ref:
        body["git_ref"] = git_ref
    return body


def _detail(response: Any) -> str:
    try:
        payload = response.json()
    except ValueError:
        return str(response.text[:300] or response.reason_phrase)
    detail = payload.get("detail") if isinstance(payload, dict) else None
    if isinstance(detail, list):  # ninja's 422: one entry per invalid field
        return "; ".join(f"{'.'.join(map(str, d.get('loc', [])))}: {d.get('msg', '')}" for d in detail)
    return str(detail if detail is not None else payload)[:300]


def post(url: str, token: str, body: dict[str, Any]) -> dict[str, Any]:
    import httpx

    target = endpoint(url)
    try:
        response = httpx.post(
            target,
            json=body,
            headers={"Authorization": f"Bearer {token}"},
            timeout=TIMEOUT_SECONDS,
        )
    except httpx.HTTPError as exc:
        raise CheckError(f"cannot reach {target}: {type(exc).__name__}: {exc}") from None
    if response.status_code != 200:
        hint = {401: " (is the token right, and of this dashboard?)", 429: ""}.get(response.status_code, "")
        retry = response.headers.get("Retry-After")
        if response.status_code == 429 and retry:
            hint = f" (retry after {retry} s)"
        raise CheckError(f"{target} answered HTTP {response.status_code}: {_detail(response)}{hint}")
    try:
        result: dict[str, Any] = response.json()
    except ValueError:
        raise CheckError(f"{target} answered 200 with a body that is not JSON") from None
    return result


def run(
    file: str,
    *,
    server: str,
    url: str,
    token: str,
    version: str | None,
    git_ref: str | None,
    as_json: bool,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
) -> int:
    try:
        text = sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
        result = post(url, token, request_body(text, server, version, git_ref))
    except OSError as exc:
        print(f"mcp-tax check: cannot read {file}: {exc.strerror or exc}", file=err)
        return 2
    except CheckError as exc:
        print(f"mcp-tax check: {exc}", file=err)
        return 2
    print(json.dumps(result, ensure_ascii=False) if as_json else result.get("report", ""), file=out)
    if result.get("status") == "error":
        for error in result.get("errors", []):
            print(f"analysis failed: {error}", file=err)
        return 2
    verdict = result.get("verdict")
    if verdict == "fail":
        return 1
    return 0 if verdict in ("pass", "warn") else 2
