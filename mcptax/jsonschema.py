"""Walking a tool's `inputSchema` as JSON Schema, not as arbitrary JSON.

A schema mixes two kinds of keys: keywords (`type`, `items`, `anyOf`, ...) and, under a few
keywords, maps whose keys are names the author chose (`properties`, `patternProperties`, `$defs`,
`definitions`, `dependentSchemas`). A tool may well have an argument called `type`, `items` or
`$ref`; a walker that treats every dict as a schema then reads the *argument* `type` (an object)
as the *keyword* `type` (a string or array). Real servers do this (Playwright, Notion, Chrome
DevTools, Firecrawl, Desktop Commander). Everything here knows which is which.

Schemas may be booleans (`true` accepts anything, `false` nothing), `type` may be a string or an
array, and `$ref` may point anywhere in the document, including at itself: references are followed
with a guard against loops. Walks are iterative, so a schema nested thousands deep cannot exhaust
the interpreter's recursion limit.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

Schema = dict[str, Any] | bool

# Keywords whose value is one subschema.
SCHEMA_KEYWORDS = (
    "additionalItems",
    "additionalProperties",
    "contains",
    "else",
    "if",
    "items",
    "not",
    "propertyNames",
    "then",
    "unevaluatedItems",
    "unevaluatedProperties",
)
# Keywords whose value is an array of subschemas (`items` too, in drafts before 2020-12).
SCHEMA_ARRAY_KEYWORDS = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
# Keywords whose value maps author-chosen names to subschemas.
SCHEMA_MAP_KEYWORDS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")


def is_schema(value: Any) -> bool:
    return isinstance(value, (dict, bool))


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def children(schema: Any, pointer: str = "") -> Iterator[tuple[str, Schema]]:
    """The direct subschemas of `schema`, each with its JSON pointer, in document order."""
    if not isinstance(schema, dict):
        return
    for key, value in schema.items():
        here = f"{pointer}/{_escape(str(key))}"
        if key in SCHEMA_MAP_KEYWORDS and isinstance(value, dict):
            for name, sub in value.items():
                if is_schema(sub):
                    yield f"{here}/{_escape(str(name))}", sub
        elif key in SCHEMA_ARRAY_KEYWORDS and isinstance(value, list):
            for index, sub in enumerate(value):
                if is_schema(sub):
                    yield f"{here}/{index}", sub
        elif key in SCHEMA_KEYWORDS and is_schema(value):
            yield here, value
        elif key == "dependencies" and isinstance(value, dict):
            # Drafts 4-7: a name maps to a schema, or to a list of required names (not a schema).
            for name, sub in value.items():
                if is_schema(sub):
                    yield f"{here}/{_escape(str(name))}", sub


def subschemas(schema: Any, pointer: str = "") -> Iterator[tuple[str, Schema]]:
    """`schema` and every schema nested in it, depth first in document order, with pointers.

    Values under non-schema keywords (`enum`, `const`, `default`, `examples`, descriptions, vendor
    extensions) are data, not schemas, and are never entered.
    """
    if not is_schema(schema):
        return
    stack: list[tuple[str, Schema]] = [(pointer, schema)]
    while stack:
        here, node = stack.pop()
        yield here, node
        stack.extend(reversed(list(children(node, here))))


def schema_types(schema: Any) -> set[str]:
    """The names in `type` (a string or an array of strings); empty when absent or malformed."""
    if not isinstance(schema, dict):
        return set()
    kind = schema.get("type")
    if isinstance(kind, str):
        return {kind}
    if isinstance(kind, list):
        return {k for k in kind if isinstance(k, str)}
    return set()


def properties(schema: Any) -> dict[str, Schema]:
    """The `properties` map of an object schema (only entries that are schemas)."""
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(props, dict):
        return {}
    return {str(name): sub for name, sub in props.items() if is_schema(sub)}


def required(schema: Any) -> set[str]:
    names = schema.get("required") if isinstance(schema, dict) else None
    return {n for n in names if isinstance(n, str)} if isinstance(names, list) else set()


def resolve_pointer(root: Any, ref: str) -> Schema | None:
    """The schema a local `$ref` (`#` or `#/a/b`) names in `root`, or None when it names nothing
    there (a remote reference, an anchor, or a missing path)."""
    if ref == "#":
        return root if is_schema(root) else None
    if not ref.startswith("#/"):
        return None
    node: Any = root
    for raw in ref[2:].split("/"):
        token = _unescape(raw)
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return None
    return node if is_schema(node) else None


def deref(root: Any, schema: Any, *, limit: int = 64) -> Any:
    """Follow `schema`'s `$ref` chain inside `root` to a schema without one. A loop, a reference
    that names nothing, or a chain longer than `limit` stops at the last schema reached."""
    seen: set[str] = set()
    while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and len(seen) < limit:
        ref = schema["$ref"]
        if ref in seen:
            break
        seen.add(ref)
        target = resolve_pointer(root, ref)
        if target is None:
            break
        schema = target
    return schema


def branches(root: Any, schema: Any) -> list[Any]:
    """`schema` itself (dereferenced) plus the alternatives of its `allOf`/`anyOf`/`oneOf`, each
    dereferenced: what a property may be, for rules that ask "is this a string/array/object"."""
    out: list[Any] = []
    pending = [schema]
    seen: set[int] = set()
    while pending:
        node = deref(root, pending.pop())
        if not isinstance(node, dict) or id(node) in seen:
            continue
        seen.add(id(node))
        out.append(node)
        for keyword in ("allOf", "anyOf", "oneOf"):
            alternatives = node.get(keyword)
            if isinstance(alternatives, list):
                pending.extend(reversed(alternatives))
    return out


def effective_types(root: Any, schema: Any) -> set[str]:
    """Every type `schema` may take, looking through `$ref` and `allOf`/`anyOf`/`oneOf`."""
    types: set[str] = set()
    for node in branches(root, schema):
        types |= schema_types(node)
    return types
