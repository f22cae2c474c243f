from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import free_port, wait_for_port
from tests.mcptax.proxy.support import PROXY, PY, SSE_UPSTREAM, SseSetup, running, sample_text


@pytest.fixture
def bulk_file(tmp_path: Path) -> tuple[Path, str, str]:
    path = tmp_path / "doc.txt"
    path.write_bytes(sample_text().encode("utf-8"))
    data = path.read_bytes()
    assert len(data) >= 60 * 1024
    return path, data.decode("utf-8"), hashlib.sha256(data).hexdigest()


@pytest.fixture
def sse_setup(tmp_path: Path) -> Iterator[SseSetup]:
    log_path = tmp_path / "log.jsonl"
    upstream_port, proxy_port = free_port(), free_port()
    proxy_cmd = [
        *PROXY,
        "--server-label",
        "scripted",
        "--log",
        str(log_path),
        "--listen",
        f"127.0.0.1:{proxy_port}",
        "--upstream",
        f"http://127.0.0.1:{upstream_port}/mcp",
    ]
    with running([PY, str(SSE_UPSTREAM), str(upstream_port)]) as upstream, running(proxy_cmd) as proxy:
        wait_for_port(upstream_port, upstream)
        wait_for_port(proxy_port, proxy)
        yield SseSetup(f"http://127.0.0.1:{proxy_port}", log_path, proxy, upstream_port)
