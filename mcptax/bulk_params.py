"""Which tool arguments carry pasted content (bulk) and which are references (a path, a URL): the
name and schema tests behind the bulk_without_reference finding (mcptax.findings).

Pure Python (no Django), like the findings that use it.
"""

from __future__ import annotations

import re
from typing import Any

from mcptax import jsonschema
from mcptax.bulk import CONTENT_KEYS

# docs/definitions.md: strings under these keys are bulk arguments whatever their size.
CONTENT_NAMES = CONTENT_KEYS
# As the last word of a longer name (new_content, issue_body) these still mean pasted content;
# code/data/source are left out because country_code, data_source and source_branch are not.
CONTENT_SUFFIXES = frozenset(
    {"content", "contents", "text", "body", "markdown", "html", "csv", "yaml", "json", "document"}
)
# String arrays are usually short lists of labels or patterns; under these names they are content.
CONTENT_ARRAY_NAMES = frozenset(
    {"lines", "rows", "records", "values", "entries", "chunks", "texts", "documents", "items", "data"}
)
REFERENCE_NAMES = frozenset(
    {"path", "url", "uri", "file", "file_path", "filepath", "source_url", "source_path", "href", "link", "id"}
)
REFERENCE_SUFFIXES = frozenset(
    {"path", "paths", "url", "urls", "uri", "uris", "file", "files", "id", "ids", "href"}
)
EXPECTED_HASH_NAMES = frozenset({"expected_sha256", "sha256", "expected_hash"})
BULK_ARRAY_MIN_ITEMS = 100
# code/data/source are also used for locators (move_file(source, destination)); there the schema
# says so, and a locator is a reference, not pasted content.
AMBIGUOUS_CONTENT_NAMES = frozenset({"code", "data", "source"})
_LOCATOR_DESCRIPTION = re.compile(r"\b(path|url|uri|file ?name|directory|folder)\b", re.IGNORECASE)

_ADVICE_WORDS = re.compile(
    r"\b(prefer\w*|instead|rather than|recommended|avoid pasting|do not paste|don't paste)\b", re.IGNORECASE
)
_REFERENCE_WORDS = re.compile(
    r"\b(path|paths|url|urls|uri|reference|file_path|source_url|link)\b", re.IGNORECASE
)
_SENTENCE_END = re.compile(r"(?<=[.!?。])\s*|\n+")
_NAME_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


def name_words(name: str) -> tuple[str, ...]:
    """read_file_chunked, readFileChunked and read-file-chunked all give (read, file, chunked)."""
    return tuple(word.lower() for word in _NAME_WORDS.findall(name))


def is_reference_name(name: str) -> bool:
    words = name_words(name)
    return name.lower() in REFERENCE_NAMES or bool(words and words[-1] in REFERENCE_SUFFIXES)


def is_content_name(name: str) -> bool:
    words = name_words(name)
    return name.lower() in CONTENT_NAMES or (len(words) > 1 and words[-1] in CONTENT_SUFFIXES)


# `files: {items: {$ref: "#"}}` must not send the nested-content check round a loop.
MAX_NESTED_ARRAY_DEPTH = 8


def is_bulk_parameter(name: str, schema: Any, root: Any, depth: int = 0) -> bool:
    """Whether the argument `name` carries pasted content. `schema` is its subschema in `root` (the
    tool's inputSchema); `$ref` and `allOf`/`anyOf`/`oneOf` alternatives are looked through, so a
    nullable `content` (anyOf string|null) is still text."""
    alternatives = jsonschema.branches(root, schema)
    types = jsonschema.effective_types(root, schema)
    item_schemas = [item for node in alternatives for item in jsonschema.branches(root, node.get("items"))]
    if "array" in types and depth < MAX_NESTED_ARRAY_DEPTH:
        # files: [{path, content}] carries pasted content whatever the array is called.
        for item in item_schemas:
            if any(
                is_bulk_parameter(key, value, root, depth + 1)
                for key, value in jsonschema.properties(item).items()
            ):
                return True
    if is_reference_name(name):
        return False
    if "array" in types:
        caps = [n["maxItems"] for n in alternatives if isinstance(n.get("maxItems"), int)]
        if caps and max(caps) < BULK_ARRAY_MIN_ITEMS:
            return False
        # `items` as a list (old drafts' tuple form) says nothing about item length: not short.
        item_types = {t for item in item_schemas for t in jsonschema.schema_types(item)}
        short_items = bool(item_types) and item_types <= {"string", "boolean"}
        return not short_items or name.lower() in CONTENT_ARRAY_NAMES or is_content_name(name)
    # A content-named parameter without a declared type is still taken as text.
    if not is_content_name(name) or (types and "string" not in types):
        return False
    if name.lower() in AMBIGUOUS_CONTENT_NAMES:
        for node in alternatives:
            description = node.get("description")
            if node.get("format") in ("uri", "uri-reference", "iri") or (
                isinstance(description, str) and _LOCATOR_DESCRIPTION.search(description)
            ):
                return False
    return True


SCALAR_TYPES = frozenset({"string", "number", "integer", "boolean"})


def carries_document(schema: Any, root: Any) -> bool:
    """What a file could hold whole, so a hash can check the copy: a text (a string in any of its
    branches) or a flat list of values (756 numbers of which 500 arrived). Not records (arrays of
    objects: entities, observations), whose fields are data of their own."""
    types = jsonschema.effective_types(root, schema)
    if "string" in types:
        return True
    if "array" not in types:
        return False
    items = [
        i for node in jsonschema.branches(root, schema) for i in jsonschema.branches(root, node.get("items"))
    ]
    item_types = {t for item in items for t in jsonschema.schema_types(item)}
    return bool(item_types) and item_types <= SCALAR_TYPES


def advises_reference(texts: list[str]) -> bool:
    for text in texts:
        for sentence in _SENTENCE_END.split(text):
            if _ADVICE_WORDS.search(sentence) and _REFERENCE_WORDS.search(sentence):
                return True
    return False
