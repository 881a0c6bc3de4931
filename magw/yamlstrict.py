"""A YAML loader for our input files: safe (no arbitrary objects) and strict about duplicate keys.

PyYAML keeps the last of two equal keys in a mapping silently, so a file with
``strategy: resilient`` and, further down, ``strategy: multipath`` would be read
as multipath without a word. ``StrictLoader`` refuses it with the key and its line.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import yaml


class StrictLoader(yaml.SafeLoader):
    """A SafeLoader that refuses duplicate keys in a mapping."""

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
