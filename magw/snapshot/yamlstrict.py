"""A YAML loader for our input files: safe (no arbitrary objects) and strict about duplicate keys.

PyYAML keeps the last of two equal keys in a mapping silently, so a file with
``strategy: resilient`` and, further down, ``strategy: multipath`` would be read
as multipath without a word. ``StrictLoader`` refuses it with the key and its line.

``FastStrictLoader`` is the same on libyaml's C parser when PyYAML was built with it
(``yaml.__with_libyaml__``), else it is ``StrictLoader``. The C parser only replaces the
scanner and parser: the nodes still go through the Python ``SafeConstructor``, so the
duplicate-key hook below runs for both, with the same marks (docs/performance.md: the pure-Python
scanner and parser were about half of ``magw plan`` on a 10k-CIDR snapshot; the C parser
reads a 100k-CIDR file several times faster). libyaml words syntax errors its own way and its
marks do not quote the line: ``load_strict`` re-reads a text the C parser refused with the Python
loader, so the message a user sees does not depend on how PyYAML was built.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import yaml

STR_TAG = "tag:yaml.org,2002:str"


class _SlashIsText(yaml.resolver.Resolver):
    """A plain scalar with a ``/`` in it resolves to a string without trying YAML 1.1's implicit types.

    Shaped for speed (docs/performance.md): the resolver is Python code called by libyaml's composer for every scalar,
    and it tries each implicit type's regex in turn: about a third of loading a 100k-CIDR snapshot. None of those
    types (bool, int, float, null, timestamp, merge, value, yaml) can contain a ``/``, so every CIDR takes the
    shortcut with the same result; tests/unit/snapshot/test_yamlstrict_resolve.py checks the patterns and the results.
    """

    def resolve(self, kind: type[yaml.Node], value: Any, implicit: tuple[bool, bool]) -> str:
        if kind is yaml.ScalarNode and implicit[0] and "/" in value and not self.yaml_path_resolvers:
            return STR_TAG
        tag: str = super().resolve(kind, value, implicit)  # type: ignore[no-untyped-call]
        return tag


class _RefuseDuplicateKeys(yaml.constructor.SafeConstructor):
    """The constructor hook shared by both loaders."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        self.flatten_mapping(node)
        seen: set[object] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, Hashable):
                continue  # the base class reports unhashable keys with its own message
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


class _StringLists(yaml.constructor.SafeConstructor):
    """A sequence whose items are all string scalars is built from their values in one pass.

    Shaped for speed (docs/performance.md): each item otherwise goes through ``construct_object`` and
    ``construct_yaml_str``, about 0.6 us a CIDR, 60 ms of loading a 100k-CIDR snapshot. A ``str``-tagged scalar
    node constructs to its own ``value`` (``construct_scalar``), and strings are immutable, so an alias to such a
    node gives the same value either way; any other sequence takes the base class's path.
    tests/unit/snapshot/test_yamlstrict_resolve.py compares the results with ``yaml.safe_load``.
    """

    def construct_sequence(self, node: yaml.SequenceNode, deep: bool = False) -> list[Any]:
        items = node.value
        if all(type(item) is yaml.ScalarNode and item.tag == STR_TAG for item in items):
            return [item.value for item in items]
        constructed: list[Any] = super().construct_sequence(node, deep=deep)
        return constructed


class StrictLoader(_SlashIsText, _RefuseDuplicateKeys, _StringLists, yaml.SafeLoader):
    """A SafeLoader (pure Python) that refuses duplicate keys in a mapping."""


FastStrictLoader: type[Any]
if getattr(yaml, "__with_libyaml__", False):

    class _CStrictLoader(_SlashIsText, _RefuseDuplicateKeys, _StringLists, yaml.CSafeLoader):
        """A CSafeLoader (libyaml scanner and parser) that refuses duplicate keys in a mapping."""

    FastStrictLoader = _CStrictLoader
else:  # pragma: no cover - PyYAML built without libyaml
    FastStrictLoader = StrictLoader


def load_strict(text: str) -> Any:
    """Load one YAML document with ``FastStrictLoader``; any error is raised as the Python loader words it."""
    try:
        return yaml.load(text, Loader=FastStrictLoader)  # SafeConstructor: no arbitrary objects
    except yaml.YAMLError:
        if FastStrictLoader is StrictLoader:
            raise
    return yaml.load(text, Loader=StrictLoader)  # raises the Python loader's error (its marks quote the line)
