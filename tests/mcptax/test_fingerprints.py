"""Reference-document fingerprints (mcptax.fingerprints): which damaged copies still share a key."""

from __future__ import annotations

import hashlib

import pytest

from mcptax.fingerprints import KINDS, candidate_keys, fingerprints, rank_candidates

MEGA = "".join(f"row {i}: {'lorem ipsum dolor sit amet ' * 2}{i * 7919 % 10007}\n" for i in range(15_000))

DOC = "".join(f"## Section {i}\nThis paragraph {i} explains the rule number {i * 31}.\n\n" for i in range(60))
UNRELATED = "".join(f"* bullet {i}: nothing to do with the other text {i * 17}\n" for i in range(60))


def shares_key(paste: str, doc: str) -> set[str]:
    doc_keys = set(fingerprints(doc).items())
    return {kind for kind, value in candidate_keys(paste) if (kind, value) in doc_keys}


@pytest.mark.parametrize(
    ("paste", "kinds"),
    [
        (DOC, {"sha256", "head", "tail", "head_ws", "tail_ws", "head_short"}),
        (DOC[:2000], {"head", "head_ws", "head_short"}),
        (DOC[:100], {"head_short"}),
        (DOC.rstrip("\n"), {"head", "tail", "head_ws", "tail_ws", "head_short"}),
        (DOC + "\n", {"head", "tail", "head_ws", "tail_ws", "head_short"}),
        (DOC.replace("\n", "\r\n"), {"head", "tail", "head_ws", "tail_ws", "head_short"}),
        ("\ufeff" + DOC, {"head", "tail", "head_ws", "tail_ws", "head_short"}),
        (DOC.replace("Section 30", "Chapter 30"), {"head", "tail", "head_ws", "tail_ws", "head_short"}),
        ("Here it is:\n" + DOC, {"tail", "tail_ws"}),
        (DOC.replace("\n", "  \n").replace("This", "\tThis"), {"head_ws", "tail_ws"}),
        (DOC.replace("\n", "\r"), {"head_ws", "tail_ws"}),
    ],
    ids=[
        "exact",
        "truncated",
        "short truncated",
        "newline dropped",
        "newline added",
        "crlf",
        "bom",
        "edited middle",
        "preamble",
        "reindented",
        "lone cr",
    ],  # fmt: skip
)
def test_damaged_copies_find_the_document(paste, kinds):
    assert shares_key(paste, DOC) == kinds


def test_unrelated_and_undetectable_copies_share_no_key():
    assert shares_key(UNRELATED, DOC) == set()
    assert shares_key(DOC[:40], DOC) == set()  # shorter than the shortest window
    assert shares_key("Here it is:\n" + DOC[:3000], DOC) == set()  # damaged at both ends


def test_short_documents_hash_whole():
    short = "tiny doc\n"
    keys = fingerprints(short)
    assert set(keys) == set(KINDS)
    assert keys["head"] == keys["head_short"] == hashlib.sha256(b"tiny doc\n").hexdigest()
    assert shares_key("tiny doc", short) >= {"tail", "tail_ws"}
    # A short paste cannot match a longer document's full-size windows.
    assert "head" not in shares_key(DOC[:200], DOC)


def test_rank_candidates_prefers_stronger_matches():
    matches = {"boilerplate": ["head_short"], "the-doc": ["head", "tail", "head_short"], "half": ["tail_ws"]}
    assert rank_candidates(matches) == ["the-doc", "half", "boilerplate"]
    assert rank_candidates({"a": ["head"], "b": ["tail"]}) == ["a", "b"]


@pytest.mark.timeout(60)
def test_fingerprints_of_a_megabyte_text():
    keys = fingerprints(MEGA)
    assert shares_key(MEGA[:500_000].replace("\n", "\r\n"), MEGA) >= {"head", "head_ws", "head_short"}
    assert len(keys) == len(KINDS) and all(len(value) == 64 for value in keys.values())


def _by_definition(text: str) -> dict[str, str]:
    """The keys as the module docstring defines them, computed over the whole text."""

    def digest(text_or_bytes: str | bytes) -> str:
        data = (
            text_or_bytes
            if isinstance(text_or_bytes, bytes)
            else text_or_bytes.encode("utf-8", "surrogatepass")
        )
        return hashlib.sha256(data).hexdigest()

    normal = text.removeprefix("\ufeff").replace("\r\n", "\n").encode("utf-8", "surrogatepass")
    stripped = text.removeprefix("\ufeff").replace("\r\n", "\n").rstrip().encode("utf-8", "surrogatepass")
    collapsed = " ".join(text.removeprefix("\ufeff").split()).encode("utf-8", "surrogatepass")
    return {
        "sha256": digest(text),
        "head": digest(normal[:256]),
        "tail": digest(stripped[-256:]),
        "head_ws": digest(collapsed[:256]),
        "tail_ws": digest(collapsed[-256:]),
        "head_short": digest(normal[:64]),
    }


# Texts whose ends test the windows the keys are computed over: whitespace runs and CRLF pairs
# across a window's edge, multi-byte characters, a byte-order mark inside the text, a text that
# is whitespace but for its ends.
EDGE_TEXTS = [
    "",
    "x",
    " \ufeff\n",
    "\ufeff" + "a\r\n" * 400,
    "a" * 1023 + "\r\n" + "b" * 2000,
    "é" * 300 + " " * 5000 + "✓" * 300,
    "𝄞 " * 2000,
    "w" + " \t\n" * 3000 + "z",
    "tail " * 10 + "\ufeff" + "q" * 1023 + "\r" + "\n" * 3,
    "x" * 4000 + "\r\n" + " " * 1019 + "end\r\n\r\n",
    ("line\r\n" * 170)[:1024] + "\n" + "more\r\n" * 300,
    "\u2028".join("p" * k for k in range(200)),
]


@pytest.mark.parametrize("text", EDGE_TEXTS, ids=range(len(EDGE_TEXTS)))
def test_keys_over_the_ends_equal_the_keys_over_the_whole_text(text):
    assert fingerprints(text) == _by_definition(text)
    # A caller that knows the sha256 gets the same keys without the text hashed again.
    assert fingerprints(text, hashlib.sha256(text.encode()).hexdigest()) == _by_definition(text)
    assert fingerprints(MEGA) == _by_definition(MEGA)
