"""A lab topology's "unknown key (expected one of: ...)" error lists exactly the keys the parser accepts there.

The same list in every lab: a plain lab's error names ``egress``, ``globalnet`` and ``pods`` too, since a
reader who mistypes one of them is writing one of those labs.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

import pytest

from magw.lab.errors import LabInputError
from magw.lab.spec.topology import load_topology, parse_topology
from tests.support.paths import EXAMPLES

TOPOLOGIES = sorted(EXAMPLES.glob("lab-*.yaml"))
LISTED = re.compile(r"unknown key \(expected one of: ([a-z_, ]+)\)$")

Doc = dict[str, Any]
# Where a key goes at each level of a topology document.
LEVELS: dict[str, Callable[[Doc], Doc]] = {
    "top": lambda doc: doc,
    "cluster": lambda doc: doc["clusters"][0],
    "service": lambda doc: doc["clusters"][0].setdefault("services", [{"name": "echo"}])[0] or {},
}


def _docs() -> dict[str, Doc]:
    """Each example topology as the parser writes it back (every field it has, defaults included)."""
    return {path.name: load_topology(path).to_doc() for path in TOPOLOGIES}


def _error(doc: Doc, level: str, key: str, value: object) -> str:
    """The error for ``doc`` with ``key: value`` added at ``level``; "" when the parser takes it."""
    changed = copy.deepcopy(doc)
    LEVELS[level](changed)[key] = value
    try:
        parse_topology(changed, source="t.yaml")
    except LabInputError as err:
        return str(err)
    return ""


def _listed(doc: Doc, level: str) -> set[str]:
    found = LISTED.search(_error(doc, level, "no_such_key", 1))
    assert found is not None
    return set(found[1].split(", "))


@pytest.mark.parametrize("level", list(LEVELS))
def test_every_lab_lists_the_same_keys_and_every_key_the_examples_use(level: str) -> None:
    """At each level, the error lists one set of keys whatever the lab (plain, Globalnet, egress), and it holds
    every key any example topology has there (``egress`` and ``globalnet`` at the top, ``pods`` per cluster)."""
    docs = _docs()
    listed = {name: frozenset(_listed(doc, level)) for name, doc in docs.items()}
    used = {key for doc in docs.values() for key in LEVELS[level](copy.deepcopy(doc))}
    assert len(set(listed.values())) == 1, listed
    assert used - next(iter(listed.values())) == set()
    if level == "top":
        assert {"egress", "globalnet"} <= next(iter(listed.values()))


@pytest.mark.parametrize("level", list(LEVELS))
def test_every_listed_key_is_one_the_parser_accepts(level: str) -> None:
    """A key from the list, given a value of the wrong shape, is refused for its value (or its lab) or taken,
    never refused as unknown: the list names only keys the parser reads."""
    doc = _docs()["lab-three-clusters.yaml"]
    refused = {key: _error(doc, level, key, -1) for key in sorted(_listed(doc, level))}
    assert {key: msg for key, msg in refused.items() if "unknown key" in msg} == {}
