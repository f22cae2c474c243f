"""Hypothesis strategies for tool lists whose schemas trip naive walkers.

Argument names are drawn from JSON Schema keywords (`type`, `properties`, `items`, `$ref`, `enum`,
...) as real servers use them; schemas mix booleans, `type` arrays, `anyOf`, `$ref` into `$defs`
(including a reference to the root, a loop) and `enum` values that look like schemas.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

KEYWORD_NAMES = ["type", "properties", "items", "$ref", "enum", "anyOf", "required", "content", "path"]

_types = st.one_of(
    st.sampled_from(["string", "object", "array", "integer", "null"]),
    st.lists(st.sampled_from(["string", "null", "number", "array"]), min_size=1, max_size=3, unique=True),
)
_enum = st.lists(
    st.one_of(st.text(max_size=6), st.fixed_dictionaries({"type": st.just({"properties": "x"})})),
    min_size=1,
    max_size=3,
)
_ref = st.sampled_from(["#", "#/$defs/item", "#/$defs/missing", "#/$defs/loop", "https://example.com/s.json"])


def _leaf() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.booleans(),
        st.builds(lambda t: {"type": t}, _types),
        st.builds(lambda t, e: {"type": t, "enum": e}, _types, _enum),
        st.builds(lambda r: {"$ref": r}, _ref),
    )


def _extend(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.builds(
            lambda props, req: {"type": "object", "properties": props, "required": req},
            st.dictionaries(st.sampled_from(KEYWORD_NAMES), inner, max_size=4),
            st.lists(st.sampled_from(KEYWORD_NAMES), max_size=2),
        ),
        st.builds(lambda t, item: {"type": t, "items": item}, _types, inner),
        st.builds(lambda alts: {"anyOf": alts}, st.lists(inner, min_size=1, max_size=3)),
    )


schemas = st.recursive(_leaf(), _extend, max_leaves=20)


def _input_schema(props: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": props,
        "$defs": {**defs, "loop": {"$ref": "#/$defs/loop"}},
    }


input_schemas = st.builds(
    _input_schema,
    st.dictionaries(st.sampled_from(KEYWORD_NAMES), schemas, max_size=5),
    st.fixed_dictionaries({"item": schemas}),
)


def tool_lists(max_size: int = 4) -> st.SearchStrategy[list[dict[str, Any]]]:
    """Tools with distinct names; some without a description."""
    tool = st.builds(
        lambda schema, description: (
            {"inputSchema": schema} | ({"description": description} if description is not None else {})
        ),
        input_schemas,
        st.one_of(st.none(), st.text(max_size=40)),
    )
    return st.lists(tool, min_size=1, max_size=max_size).map(
        lambda tools: [{"name": f"tool_{i}", **t} for i, t in enumerate(tools)]
    )
