"""Bloat findings for one snapshot's tools: where the fixed tax could shrink, and by about how much.

Pure Python (no Django) so lint runs in the poller, the CI gate and tests alike. Every rule here is
a heuristic over names and schemas; each finding says why it fired so a reader can disagree.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

from mcptax import jsonschema, tokens
from mcptax.bulk_params import (
    EXPECTED_HASH_NAMES,
    advises_reference,
    carries_document,
    is_bulk_parameter,
    is_reference_name,
    name_words,
)

NEAR_DUPLICATE_TOOLS = "near_duplicate_tools"
OVERSIZED_DESCRIPTION = "oversized_description"
OVERSIZED_SCHEMA = "oversized_schema"
REPEATED_SUBSCHEMA = "repeated_subschema"
BULK_WITHOUT_REFERENCE = "bulk_without_reference"
LARGE_SURFACE = "large_surface"
KINDS = (
    NEAR_DUPLICATE_TOOLS,
    OVERSIZED_DESCRIPTION,
    OVERSIZED_SCHEMA,
    REPEATED_SUBSCHEMA,
    BULK_WITHOUT_REFERENCE,
    LARGE_SURFACE,
)
INFO = "info"
WARNING = "warning"

# Collapsing a variant into a parameter is not free: an enum value or flag with a short description.
PARAMETER_ALLOWANCE_TOKENS = 20
NEAR_DUPLICATE_WARNING_SAVINGS = 200
# "Far above the team median": a ratio, ignored for items too small to matter whatever the median.
MEDIAN_RATIO = 3.0
MEDIAN_RULE_MIN_TOKENS = 50
# Smaller fragments (a two-field object) cost less to repeat than a $ref and its $defs entry.
MIN_FRAGMENT_TOKENS = 25
# A small core plus an on-demand help tool (the reported 15 -> 4 + help file server).
LARGE_SURFACE_MIN_TOOLS = 10
LARGE_SURFACE_MIN_TOKENS = 5000
LARGE_SURFACE_WARNING_TOKENS = 10000
CORE_TOOL_COUNT = 4
HELP_TOOL_TOKENS = 100
MIN_SURFACE_SAVINGS = 300


class AnalysisTimeout(TimeoutError):
    """The findings were not done by the caller's deadline; nothing partial is returned."""


Check = Callable[[], None]


def _deadline_check(deadline: float | None) -> Check:
    """A callable the rules call in their loops; it raises AnalysisTimeout once `deadline` (a
    time.monotonic() value) has passed, so a huge or hostile list cannot hold the caller for long."""

    def check() -> None:
        if deadline is not None and time.monotonic() >= deadline:
            raise AnalysisTimeout("the findings did not finish in time")

    return check


@dataclass
class Finding:
    kind: str
    severity: str
    tools: list[str]
    title: str
    detail: str
    estimated_savings_tokens: int | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def analyze(
    tools: list[dict[str, Any]],
    *,
    encoding: str = tokens.DEFAULT_ENCODING,
    team_median_description_tokens: float | None = None,
    team_median_schema_tokens: float | None = None,
    description_limit: int = 300,
    schema_limit: int = 600,
    report: tokens.TokenReport | None = None,
    deadline: float | None = None,
) -> list[Finding]:
    """Bloat findings for one snapshot's tools, most actionable first.

    Token figures are those of tokens.account (model-visible tools, `encoding`); a caller that has
    already counted them passes its `report`. Medians, when the team has them, add a relative rule
    beside the absolute limits. Past `deadline` (time.monotonic()) raises AnalysisTimeout.
    """
    check = _deadline_check(deadline)
    check()
    if report is None:
        report = tokens.account(tools, encoding=encoding)
    check()
    enc = tokens.counter(encoding)
    found = [
        *_near_duplicates(tools, report, check),
        *_oversized(
            report,
            kind=OVERSIZED_DESCRIPTION,
            what="description",
            figure="description_tokens",
            limit=description_limit,
            median=team_median_description_tokens,
        ),
        *_oversized(
            report,
            kind=OVERSIZED_SCHEMA,
            what="input schema",
            figure="schema_tokens",
            limit=schema_limit,
            median=team_median_schema_tokens,
        ),
        *_repeated_subschemas(tools, enc, check),
        *_bulk_without_reference(tools, check),
        *_large_surface(tools, report),
    ]
    found.sort(
        key=lambda f: (
            f.severity != WARNING,
            -(f.estimated_savings_tokens if f.estimated_savings_tokens is not None else -1),
            KINDS.index(f.kind),
            f.tools,
        )
    )
    return found


def _properties(tool: dict[str, Any]) -> dict[str, Any]:
    return jsonschema.properties(tool.get("inputSchema"))


def _join(names: list[str]) -> str:
    if len(names) <= 2:
        return " and ".join(names)
    return ", ".join(names[:-1]) + " and " + names[-1]


def _shared_with_another(members: list[str], props: dict[str, set[str]]) -> set[str]:
    """The parameters at least two of `members` have: counted once, not compared pair by pair."""
    counts = Counter(p for m in dict.fromkeys(members) for p in props[m])
    return {p for p, n in counts.items() if n >= 2}


def _near_duplicates(
    tools: list[dict[str, Any]], report: tokens.TokenReport, check: Check
) -> Iterator[Finding]:
    tokens_by_name = {t.name: t.tokens for t in report.tools}
    names = [tool["name"] for tool in tools]
    words = {tool["name"]: name_words(tool["name"]) for tool in tools}
    props = {tool["name"]: set(_properties(tool)) for tool in tools}
    full_names = set(words.values())

    # A one-word stem ("get", "list") is too generic unless a tool carries exactly that name.
    # Each stem maps to the names that start with it, in list order (no scan of all names per stem).
    stems: dict[tuple[str, ...], list[str]] = {}
    for name in names:
        for k in range(1, len(words[name]) + 1):
            stem = words[name][:k]
            if k >= 2 or stem in full_names:
                stems.setdefault(stem, []).append(name)

    assigned: set[str] = set()
    # Shortest stems first: read_file + read_file_chunked + read_file_with_encoding form one family
    # rather than read_file_with_* splitting off.
    for stem in sorted(stems, key=lambda s: (len(s), s)):
        check()
        members = [n for n in stems[stem] if n not in assigned]
        if len(members) < 2:
            continue
        # Same stem but nothing in common to pass (list_directory vs list_directory_roots with no
        # arguments) is not one operation with variants.
        common = _shared_with_another(members, props)
        members = [m for m in members if props[m] & common]
        if len(members) < 2:
            continue
        sizes = [tokens_by_name[m] for m in members]
        savings = sum(sizes) - max(sizes) - PARAMETER_ALLOWANCE_TOKENS * (len(members) - 1)
        if savings <= 0:
            continue
        assigned.update(members)
        largest = members[sizes.index(max(sizes))]
        shared = sorted(set.intersection(*(props[m] for m in members))) or sorted(
            _shared_with_another(members, props)
        )
        variants = sorted(set.union(*(props[m] for m in members)) - set(shared))
        stem_name = "_".join(stem)
        yield Finding(
            kind=NEAR_DUPLICATE_TOOLS,
            severity=WARNING if savings >= NEAR_DUPLICATE_WARNING_SAVINGS else INFO,
            tools=members,
            title=f"{_join(members)} could be one tool",
            detail=(
                f"These {len(members)} tools share the name stem '{stem_name}' and the parameters "
                f"{', '.join(shared)}. One tool (e.g. {largest}) taking "
                + (f"{', '.join(variants)} as optional parameters" if variants else "a mode parameter")
                + f" would send about {savings} fewer tokens on every request."
            ),
            estimated_savings_tokens=savings,
        )


def _oversized(
    report: tokens.TokenReport, *, kind: str, what: str, figure: str, limit: int, median: float | None
) -> Iterator[Finding]:
    for tool in report.tools:
        size = getattr(tool, figure)
        reasons: list[str] = []
        targets: list[int] = []
        over_limit = size > limit
        if over_limit:
            reasons.append(f"above the limit of {limit}")
            targets.append(limit)
        if median and median > 0 and size >= MEDIAN_RULE_MIN_TOKENS and size > MEDIAN_RATIO * median:
            reasons.append(f"{size / median:.1f}x the team median of {median:g}")
            targets.append(int(MEDIAN_RATIO * median))
        if not reasons:
            continue
        savings = size - min(targets)
        yield Finding(
            kind=kind,
            severity=WARNING if over_limit else INFO,
            tools=[tool.name],
            title=f"{tool.name}'s {what} is {size} tokens",
            detail=(
                f"The {what} of {tool.name} is {size} tokens, {' and '.join(reasons)}. It is sent on "
                f"every request; trimming it to {min(targets)} tokens (examples and long explanations "
                "can move to a help tool or the docs) would save about "
                f"{savings} tokens per request."
            ),
            estimated_savings_tokens=savings,
        )


def _is_structured_schema(node: Any) -> bool:
    """An object or array schema: a fragment big enough to be worth a $defs entry when repeated."""
    if not isinstance(node, dict):
        return False
    return (
        bool(jsonschema.schema_types(node) & {"object", "array"}) or "properties" in node or "items" in node
    )


def _repeated_subschemas(
    tools: list[dict[str, Any]], enc: Callable[[str], int], check: Check
) -> Iterator[Finding]:
    # Keyed on sorted JSON so a fragment written with its keys in another order still counts.
    occurrences: dict[str, list[tuple[str, str]]] = {}
    first_copy: dict[str, Any] = {}
    for tool in tools:
        check()
        schema = tool.get("inputSchema")
        if not isinstance(schema, dict):
            continue
        # Nested schemas only (the whole inputSchema is the tool, counted by the size rules).
        for pointer, node in jsonschema.subschemas(schema):
            if not pointer or not _is_structured_schema(node):
                continue
            key = json.dumps(node, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            occurrences.setdefault(key, []).append((tool["name"], pointer))
            first_copy.setdefault(key, node)

    groups = []
    for key, where in occurrences.items():
        if len(where) < 2:
            continue
        check()
        size = enc(tokens.canonical(first_copy[key]))
        if size >= MIN_FRAGMENT_TOKENS:
            groups.append((size, key, where))

    reported: dict[str, list[str]] = {}  # tool -> pointers already reported in it
    # Largest first, so a repeated fragment nested inside a larger repeated one is not counted twice.
    for size, _key, where in sorted(groups, key=lambda g: (-g[0], g[1])):
        check()
        if all(
            any(pointer.startswith(r_pointer + "/") for r_pointer in reported.get(name, ()))
            for name, pointer in where
        ):
            continue
        for name, pointer in where:
            reported.setdefault(name, []).append(pointer)
        copies = len(where)
        tool_names = list(dict.fromkeys(tool for tool, _ in where))
        label = where[0][1].rsplit("/", 1)[-1]
        savings = (copies - 1) * size
        yield Finding(
            kind=REPEATED_SUBSCHEMA,
            severity=INFO,
            tools=tool_names,
            title=f"The '{label}' sub-schema ({size} tokens) is repeated {copies} times in {_join(tool_names)}",
            detail=(
                f"An identical {size}-token schema fragment appears at "
                + ", ".join(f"{tool}#{pointer}" for tool, pointer in where)
                + f". Defining it once ($defs) and referring to it would save about {savings} tokens."
            ),
            estimated_savings_tokens=savings,
        )


def _bulk_without_reference(tools: list[dict[str, Any]], check: Check) -> Iterator[Finding]:
    for tool in tools:
        check()
        root = tool.get("inputSchema")
        props = _properties(tool)
        bulk = [name for name, schema in props.items() if is_bulk_parameter(name, schema, root)]
        if not bulk:
            continue
        required = jsonschema.required(root)
        references = [name for name in props if is_reference_name(name)]
        # A reference is an alternative only if the content may be left out; write_file(path,
        # content) with both required names a destination, not a source.
        # (content OR path/url is expressed by leaving content out of the top-level `required`,
        # with or without an anyOf spelling out the choice).
        content_optional = any(name not in required for name in bulk)
        has_reference = bool(references) and content_optional
        has_expected_hash = any(name.lower() in EXPECTED_HASH_NAMES for name in props)
        # A hash check fits a document (one text a file or URL also holds), not records or short
        # fields: a knowledge graph's entities and observations are data, not a copy of anything.
        documents = [name for name in bulk if carries_document(props[name], root)]
        texts = [tool.get("description")] + [
            node.get("description") for name in bulk for node in jsonschema.branches(root, props[name])
        ]
        advises = advises_reference([t for t in texts if isinstance(t, str)])

        missing: list[tuple[str, str]] = []  # (short label for the title, phrase for the detail)
        if not has_reference:
            missing.append(("no reference alternative", "a reference parameter (path/url) usable instead"))
        if documents and not has_expected_hash:
            missing.append(("no expected_sha256", "an expected_sha256 parameter"))
        if not advises:
            missing.append(("no advice to prefer the reference", "a description advising the reference"))
        if not missing:
            continue
        params = ", ".join(bulk)
        name = tool["name"]
        yield Finding(
            kind=BULK_WITHOUT_REFERENCE,
            severity=WARNING if not has_reference else INFO,
            tools=[name],
            title=f"{name} takes bulk {params} with {_join([label for label, _ in missing])}",
            detail=(
                f"Agents re-type bulk arguments ({params}) as output tokens, slowly and not always "
                f"exactly. {name} lacks {_join([phrase for _, phrase in missing])}. Accept a path or URL next to the content, "
                + ("accept expected_sha256 and fail on mismatch, " if documents else "")
                + "and say 'prefer the reference' in the description; "
                + ("all three are" if documents else "both are")
                + " additive changes."
            ),
            estimated_savings_tokens=None,
        )


def _large_surface(tools: list[dict[str, Any]], report: tokens.TokenReport) -> Iterator[Finding]:
    count = report.tool_count
    total = report.fixed_tax_tokens
    if count <= CORE_TOOL_COUNT + 1:
        return
    if count < LARGE_SURFACE_MIN_TOOLS and total < LARGE_SURFACE_MIN_TOKENS:
        return
    # "Most general" approximated as taking the most parameters: such a tool covers the variants.
    ranked = sorted(
        zip(tools, report.tools, strict=True),
        key=lambda pair: (-len(_properties(pair[0])), -pair[1].tokens),
    )
    core = [figures for _tool, figures in ranked[:CORE_TOOL_COUNT]]
    core_cost = sum(t.tokens for t in core) + HELP_TOOL_TOKENS
    savings = total - core_cost
    if savings < MIN_SURFACE_SAVINGS:
        return
    names = [t.name for t in report.tools]
    yield Finding(
        kind=LARGE_SURFACE,
        severity=WARNING if total >= LARGE_SURFACE_WARNING_TOKENS else INFO,
        tools=names,
        title=f"{count} tools cost {total:,} tokens on every request",
        detail=(
            f"Every request carries all {count} tools. A core of {CORE_TOOL_COUNT} general tools (e.g. "
            f"{_join([t.name for t in core])}) plus an on-demand help tool of about {HELP_TOOL_TOKENS} "
            f"tokens that describes the rest would cost about {core_cost:,} tokens, saving about "
            f"{savings:,} per request."
        ),
        estimated_savings_tokens=savings,
    )
