from __future__ import annotations

from collections.abc import Iterator

import pytest

from examples.servers.launch import serve_http


@pytest.fixture(scope="module")
def paged_sprawl_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("paged")
    with serve_http("sprawling", "--page-size", "4", "--root", str(root)) as url:
        yield url
