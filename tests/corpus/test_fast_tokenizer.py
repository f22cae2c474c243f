"""The fast tokenizer behind `mcptax.tokens.count` gives tiktoken's own token ids, not just its counts.

The product counts with bpe-openai's compiled tokenizer for cl100k_base and o200k_base. These tests
hold it to tiktoken (the reference, built without mcptax by `tiktoken_reference`) id for id, over
every text the fixed tax is made of in the real-server corpus, and over a fuzzed text set.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import pytest
from bpe_openai import _bindings
from hypothesis import given, settings
from hypothesis import strategies as st

from mcptax import tokens
from tests.corpus.conftest import CAPTURES, load_capture, visible
from tests.helpers import compact, tiktoken_reference

ENCODINGS = ("cl100k_base", "o200k_base")


@functools.cache
def reference(name: str) -> Any:
    return tiktoken_reference(name)


@functools.cache
def fast(name: str) -> Any:
    return _bindings.tokenizer_for_encoding(name)


def corpus_texts(path) -> list[str]:
    """Every text the fixed tax of a capture is counted over: the whole list, each tool, each
    description and schema, and the instructions."""
    document = load_capture(path)
    tools = [visible(t) for t in document["tools"]]
    texts = [compact(tools)]
    for tool in tools:
        texts.append(compact(tool))
        if isinstance(tool.get("description"), str):
            texts.append(tool["description"])
        if "inputSchema" in tool:
            texts.append(compact(tool["inputSchema"]))
    instructions = (document.get("initialize") or {}).get("instructions")
    if isinstance(instructions, str):
        texts.append(instructions)
    return texts


def assert_same_ids(name: str, text: str) -> None:
    expected = reference(name).encode_ordinary(text)
    assert fast(name).encode(text) == expected
    assert tokens.count(text, name) == len(expected)


@pytest.mark.parametrize("name", ENCODINGS)
@pytest.mark.parametrize("path", CAPTURES, ids=[p.stem for p in CAPTURES])
def test_same_ids_over_the_real_server_corpus(path, name) -> None:
    for text in corpus_texts(path):
        assert_same_ids(name, text)


AWKWARD = [
    "",
    "<|endoftext|>",
    "a<|endoftext|>b <|fim_prefix|><|endofprompt|>",
    "日本語のテキストと中文混合、한국어도。",
    "emoji 😀🎉👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈",
    " " * 5000 + "x",
    "\t" * 300 + "\n" * 300,
    "\r\n" * 400,
    "word " * 3000,
    "1234567890" * 200,
    "ÀÉÎõü ß ﬁ Ａ ｶﾀｶﾅ ٠١٢ हिन्दी",
    json.dumps({"k": ["v" * 100] * 50}),
    "\u200b\u200d\ufeff zero widths",
]


@pytest.mark.parametrize("name", ENCODINGS)
@pytest.mark.parametrize("text", AWKWARD, ids=range(len(AWKWARD)))
def test_same_ids_on_awkward_text(text, name) -> None:
    assert_same_ids(name, text)


@pytest.mark.parametrize("name", ENCODINGS)
def test_lone_surrogates_are_counted_as_tiktoken_counts_them(name) -> None:
    # They cannot cross into the compiled tokenizer; tiktoken replaces each one with U+FFFD.
    text = "before \ud800 middle \udfff after"
    assert tokens.count(text, name) == len(reference(name).encode_ordinary(text))
    replaced = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    assert_same_ids(name, replaced)


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=0, max_size=400))
def test_same_ids_on_fuzzed_text(text) -> None:
    for name in ENCODINGS:
        assert_same_ids(name, text)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(AWKWARD[1:] + ["a", " ", "\n", "é", "😀", "的"]), max_size=30))
def test_same_ids_on_fuzzed_mixtures(parts) -> None:
    for name in ENCODINGS:
        assert_same_ids(name, "".join(parts))


def test_a_reference_encoding_object_is_counted_by_itself_not_the_fast_path() -> None:
    # Tests pass tiktoken's own objects as oracles; those must never be swapped for the product's.
    ref = reference("cl100k_base")
    seen: list[str] = []

    class Spy:
        name = ref.name

        def encode_ordinary(self, text: str) -> list[int]:
            seen.append(text)
            return ref.encode_ordinary(text)

    assert tokens.count("hello world", Spy()) == 2
    assert seen == ["hello world"]
