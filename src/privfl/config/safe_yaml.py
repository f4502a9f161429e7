"""YAML for configurations: PyYAML's safe loader with three more rules.

* **No anchors, aliases or merge keys** (``&name``, ``*name``, ``<<:``). An alias repeats a node
  without copying it in the file, so a few lines can stand for an object of billions of
  elements (the "billion laughs" pattern); refusing aliases outright is the simplest sound rule,
  and a configuration never needs them. With no aliases, the document is a tree no larger than
  the text, whose size :data:`MAX_YAML_BYTES` caps.
* **No repeated keys**, in any mapping at any depth: PyYAML would keep the last value silently.
* **Integers of at most 4,300 digits** (Python's limit on converting text to ``int``), refused
  with the line rather than as an error without position.

Each violation is a :class:`YAMLInputError` (a ``yaml.MarkedYAMLError``) whose ``problem`` names
the dotted key (``training.lr``, ``model.kwargs.hidden[1]``) and whose ``problem_mark`` is the
line and column. Nesting deeper than Python's recursion limit (PyYAML composes recursively) is a
:class:`YAMLInputError` too.
"""

from __future__ import annotations

import sys
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

__all__ = ["MAX_YAML_BYTES", "StrictLoader", "YAMLInputError", "load_strict"]

#: Largest YAML text read, 1 MiB (configurations are a few kB).
MAX_YAML_BYTES = 2**20

_MERGE_TAG = "tag:yaml.org,2002:merge"
_INT_TAG = "tag:yaml.org,2002:int"


class YAMLInputError(yaml.MarkedYAMLError):
    """YAML that privfl refuses: an anchor or alias, a repeated key, an integer too long."""


def _dotted(path: str, key_node: Node, key: object) -> str:
    """``path.key`` with the key as written (``yes`` stays ``yes``, not ``True``)."""
    name = key_node.value if isinstance(key_node, ScalarNode) else key
    return f"{path}.{name}" if path else str(name)


class StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses anchors, aliases, merge keys and repeated keys."""

    def compose_node(self, parent: Node | None, index: Node | None) -> Node:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            raise YAMLInputError(
                None, None, f"alias *{event.anchor} is not allowed: write the value out (YAML "
                "aliases can expand into huge objects, so privfl refuses them)", event.start_mark)
        if getattr(event, "anchor", None) is not None:
            raise YAMLInputError(
                None, None, f"anchor &{event.anchor} is not allowed: privfl refuses YAML "
                "anchors and aliases (they can expand into huge objects)", event.start_mark)
        return super().compose_node(parent, index)

    def construct_document(self, node: Node) -> Any:
        self._check_keys(node, "")
        return super().construct_document(node)

    def _check_keys(self, node: Node, path: str) -> None:
        """Refuse merge keys and a key given twice in one mapping, anywhere in the tree."""
        if isinstance(node, SequenceNode):
            for index, item in enumerate(node.value):
                self._check_keys(item, f"{path}[{index}]")
        if not isinstance(node, MappingNode):
            return
        seen: dict[object, Node] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                raise YAMLInputError(
                    None, None, f"merge key << in {path or 'the top level'} is not allowed: "
                    "write the keys out", key_node.start_mark)
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node)
            except TypeError:  # an unhashable key: the constructor reports it
                first = key_node
            if first is not key_node:
                raise YAMLInputError(
                    None, None, f"{_dotted(path, key_node, key)} is given twice (first on line "
                    f"{first.start_mark.line + 1}): a key may appear only once",
                    key_node.start_mark)
            self._check_keys(value_node, _dotted(path, key_node, key))

    def construct_yaml_int(self, node: ScalarNode) -> int:
        try:
            return super().construct_yaml_int(node)
        except ValueError:
            digits = sum(c.isdigit() for c in str(node.value))
            limit = getattr(sys, "get_int_max_str_digits", lambda: 4300)()
            raise YAMLInputError(
                None, None, f"an integer of {digits} digits is too long: at most {limit} digits",
                node.start_mark) from None


StrictLoader.add_constructor(_INT_TAG, StrictLoader.construct_yaml_int)


def load_strict(text: str) -> Any:
    """The object in YAML ``text`` under :class:`StrictLoader`'s rules.

    Raises
    ------
    YAMLInputError
        For text over :data:`MAX_YAML_BYTES` characters, anchors, aliases, merge keys,
        repeated keys, over-long integers and nesting too deep to compose.
    yaml.YAMLError
        For text that is not YAML.
    """
    if len(text) > MAX_YAML_BYTES:
        raise YAMLInputError(
            None, None, f"{len(text)} characters is too long: at most {MAX_YAML_BYTES} "
            "(a configuration is a few kB)", None)
    loader = StrictLoader(text)
    try:
        return loader.get_single_data()
    except RecursionError:
        raise YAMLInputError(
            None, None, "nested deeper than the YAML reader allows (Python's recursion limit)",
            None) from None
    finally:
        loader.dispose()
