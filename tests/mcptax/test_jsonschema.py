"""JSON Schema walking (mcptax/jsonschema.py): keywords vs author-chosen names, $ref, booleans.

The property tests build schemas from a small tree of the test's own, so the expected subschemas
and their pointers come from the tree, not from the module under test.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from mcptax.jsonschema import (
    branches,
    deref,
    effective_types,
    properties,
    resolve_pointer,
    schema_types,
    subschemas,
)

# Property names that are also keywords: the names real servers use and walkers trip on.
TRICKY_NAMES = ["type", "properties", "items", "$ref", "enum", "anyOf", "description", "required", "x/y~z"]


@dataclass
class Node:
    """A schema as the test builds it: `boolean` set means a boolean schema."""

    boolean: bool | None = None
    type: str | list[str] | None = None
    props: dict[str, Node] = field(default_factory=dict)
    items: Node | None = None
    any_of: list[Node] = field(default_factory=list)
    enum: list[Any] | None = None

    def render(self) -> Any:
        if self.boolean is not None:
            return self.boolean
        out: dict[str, Any] = {}
        if self.type is not None:
            out["type"] = self.type
        if self.props:
            out["properties"] = {name: child.render() for name, child in self.props.items()}
        if self.items is not None:
            out["items"] = self.items.render()
        if self.any_of:
            out["anyOf"] = [child.render() for child in self.any_of]
        if self.enum is not None:
            out["enum"] = self.enum
        return out

    def pointers(self, here: str = "") -> list[str]:
        """Every subschema's pointer, depth first in document order (the order `render` writes)."""
        out = [here]
        for name, child in self.props.items():
            escaped = name.replace("~", "~0").replace("/", "~1")
            out += child.pointers(f"{here}/properties/{escaped}")
        if self.items is not None:
            out += self.items.pointers(f"{here}/items")
        for index, child in enumerate(self.any_of):
            out += child.pointers(f"{here}/anyOf/{index}")
        return out


def pointer_get(document: Any, pointer: str) -> Any:
    node = document
    for raw in pointer.split("/")[1:]:
        token = raw.replace("~1", "/").replace("~0", "~")
        node = node[int(token)] if isinstance(node, list) else node[token]
    return node


types = st.one_of(
    st.none(),
    st.sampled_from(["string", "object", "array", "integer"]),
    st.lists(st.sampled_from(["string", "null", "number"]), min_size=1, max_size=3),
)
# enum values are data: dicts that look like schemas must never be walked into
enum_data = st.one_of(
    st.none(),
    st.lists(
        st.one_of(st.text(max_size=5), st.fixed_dictionaries({"type": st.just({"not": "a schema"})})),
        max_size=3,
    ),
)


def nodes() -> st.SearchStrategy[Node]:
    leaf = st.one_of(st.builds(Node, boolean=st.booleans()), st.builds(Node, type=types, enum=enum_data))
    return st.recursive(
        leaf,
        lambda inner: st.builds(
            Node,
            type=types,
            props=st.dictionaries(st.sampled_from(TRICKY_NAMES), inner, max_size=4),
            items=st.one_of(st.none(), inner),
            any_of=st.lists(inner, max_size=2),
            enum=enum_data,
        ),
        max_leaves=25,
    )


@settings(max_examples=300, deadline=None)
@given(nodes())
def test_walk_yields_exactly_the_subschemas_with_their_pointers(node):
    schema = node.render()
    walked = list(subschemas(schema))
    assert [pointer for pointer, _ in walked] == node.pointers()
    for pointer, sub in walked:
        assert sub is pointer_get(schema, pointer) or sub == pointer_get(schema, pointer)
        assert isinstance(sub, (dict, bool))
        assert isinstance(schema_types(sub), set)  # never raises on a property named `type`


@settings(max_examples=200, deadline=None)
@given(nodes())
def test_properties_are_the_authors_names_whatever_they_are_called(node):
    schema = node.render()
    assert list(properties(schema)) == list(node.props)


def test_a_property_named_type_is_not_the_type_keyword():
    # The shape that crashed polls of Playwright and Notion.
    schema = {
        "type": "object",
        "properties": {
            "type": {"type": "string", "enum": ["png", "jpeg"]},
            "properties": {"type": "object", "properties": {"items": {"type": "array"}}},
        },
    }
    walked = dict(subschemas(schema))
    assert set(walked) == {
        "",
        "/properties/type",
        "/properties/properties",
        "/properties/properties/properties/items",
    }
    assert schema_types(walked["/properties/type"]) == {"string"}
    assert schema_types(schema["properties"]) == set(), "a properties map is not a schema"


def test_type_arrays_booleans_and_combinators():
    schema = {
        "type": ["object", "null"],
        "properties": {"anything": True, "nothing": False},
        "allOf": [{"$ref": "#/$defs/base"}],
        "$defs": {"base": {"type": "object", "additionalProperties": {"type": "integer"}}},
        "not": {"type": "string"},
        "if": {"required": ["x"]},
        "then": {"properties": {"x": {"const": 1}}},
        "else": False,
        "prefixItems": [{"type": "string"}],
        "dependencies": {"a": ["b"], "c": {"required": ["d"]}},
    }
    pointers = [p for p, _ in subschemas(schema)]
    assert pointers == [
        "",
        "/properties/anything",
        "/properties/nothing",
        "/allOf/0",
        "/$defs/base",
        "/$defs/base/additionalProperties",
        "/not",
        "/if",
        "/then",
        "/then/properties/x",
        "/else",
        "/prefixItems/0",
        "/dependencies/c",
    ]
    assert schema_types(schema) == {"object", "null"}


def test_refs_are_followed_and_loops_stop():
    root = {
        "$defs": {
            "text": {"type": "string"},
            "alias": {"$ref": "#/$defs/text"},
            "loop_a": {"$ref": "#/$defs/loop_b"},
            "loop_b": {"$ref": "#/$defs/loop_a"},
            "a/b": {"type": "integer"},
        },
        "properties": {"content": {"$ref": "#/$defs/alias"}, "self": {"$ref": "#"}},
    }
    assert deref(root, root["properties"]["content"]) == {"type": "string"}
    assert deref(root, {"$ref": "#/$defs/loop_a"}) in ({"$ref": "#/$defs/loop_a"}, {"$ref": "#/$defs/loop_b"})
    assert deref(root, {"$ref": "#/$defs/a~1b"}) == {"type": "integer"}
    assert deref(root, {"$ref": "https://example.com/schema.json"}) == {
        "$ref": "https://example.com/schema.json"
    }
    assert deref(root, root["properties"]["self"]) is root
    assert resolve_pointer(root, "#/$defs/missing") is None


def test_effective_types_look_through_refs_and_alternatives():
    root = {"$defs": {"text": {"type": "string"}, "rows": {"type": "array", "items": {"type": "object"}}}}
    content = {"anyOf": [{"$ref": "#/$defs/text"}, {"type": "null"}]}
    assert effective_types(root, content) == {"string", "null"}
    assert effective_types(root, {"oneOf": [{"$ref": "#/$defs/rows"}, {"$ref": "#/$defs/rows"}]}) == {"array"}
    loop = {"$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "string"}]}}}
    assert effective_types(loop, {"$ref": "#/$defs/a"}) == {"string"}
    assert len(branches(loop, {"$ref": "#/$defs/a"})) == 2


def test_very_deep_schemas_walk_without_recursion():
    depth = 20_000  # far past Python's recursion limit
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "array", "items": schema}
    walked = sum(1 for _ in subschemas(schema))
    assert walked == depth + 1


def test_large_schemas_walk_every_property():
    schema = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(5000)}}
    assert sum(1 for _ in subschemas(schema)) == 5001
    assert json.loads(json.dumps(schema)) == schema  # the walk did not change the document
