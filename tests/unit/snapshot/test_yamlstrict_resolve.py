"""The strict loaders' resolver shortcut (magw.snapshot.yamlstrict._SlashIsText): a plain scalar with a ``/`` is a
string.

The shortcut skips YAML 1.1's implicit-type regexes. It is only right while none of them can match a ``/``:
the first test reads PyYAML's own patterns (so an upgrade that adds one fails here, not in a user's file), the
others compare our loaders with PyYAML's ``safe_load`` on the same text.
"""

from __future__ import annotations

import re

import pytest
import yaml

from magw.snapshot.yamlstrict import FastStrictLoader, StrictLoader, load_strict

# Pattern pieces that could match a "/": a wildcard, a negated class, a negated shorthand, or "/" itself.
_COULD_MATCH_SLASH = re.compile(r"(?<!\\)\.|\[\^|\\[SWD]|/")


@pytest.mark.parametrize("loader", [StrictLoader, FastStrictLoader])
def test_no_implicit_type_can_contain_a_slash(loader: type) -> None:
    patterns = {rx.pattern for resolvers in loader.yaml_implicit_resolvers.values() for _tag, rx in resolvers}
    assert patterns, "PyYAML's implicit resolvers were not found"
    for pattern in patterns:
        without_escapes = re.sub(r"\\[^SWD]", "", pattern)
        assert not _COULD_MATCH_SLASH.search(without_escapes), pattern


_SAMPLES = [
    "10.0.0.0/16",
    "a/b",
    "1/2",
    "/",
    "2001:db8::/32",
    "1_000",
    "0x1F",
    "1.5",
    "1e3",
    "yes",
    "No",
    "~",
    "null",
    "2026-11-23",
    "<<x",
    "12:30:00",
    "text",
    "0777",
]


@pytest.mark.parametrize("loader", [StrictLoader, FastStrictLoader])
def test_scalars_resolve_as_pyyaml_resolves_them(loader: type) -> None:
    """Plain, quoted, in lists and as keys: the same Python values as ``yaml.safe_load``."""
    lines = [f"k{i}: {s}" for i, s in enumerate(_SAMPLES)]
    lines += [f"q{i}: '{s}'" for i, s in enumerate(_SAMPLES)]
    lines += ["list:"] + [f"- {s}" for s in _SAMPLES]
    lines += ["map:"] + [f"  {s}/k: {s}" for s in _SAMPLES[:4]]
    text = "\n".join(lines) + "\n"
    assert yaml.load(text, Loader=loader) == yaml.safe_load(text)


def test_load_strict_reads_cidr_lists_as_strings() -> None:
    data = load_strict("pod_cidrs: [10.0.0.0/16, 11.0.1.0/24]\nport: 4800\non: yes\n")
    assert data == {"pod_cidrs": ["10.0.0.0/16", "11.0.1.0/24"], "port": 4800, True: True}


_SEQUENCES = """\
cidrs: [10.0.0.0/16, 11.0.1.0/24, '12.0.0.0/8', "a b"]
mixed: [10.0.0.0/16, 5, yes, ~, 1.5]
tagged: [!!str 5, !!str yes, x]
anchored: [&first 10.0.0.0/16, *first, other]
nested: [[a/b, c], [1, 2], []]
maps: [{k: v}, a/b]
empty: []
block:
- 10.1.0.0/16
- 'quoted'
- 7
aliased: *first
"""


@pytest.mark.parametrize("loader", [StrictLoader, FastStrictLoader])
def test_sequences_load_as_pyyaml_loads_them(loader: type) -> None:
    """The string-list shortcut (magw.snapshot.yamlstrict._StringLists) gives what ``yaml.safe_load`` gives, types
    included."""
    ours = yaml.load(_SEQUENCES, Loader=loader)
    theirs = yaml.safe_load(_SEQUENCES)
    assert ours == theirs
    assert repr(ours) == repr(theirs)  # 5 and "5", True and "yes" compare unequal anyway; repr pins the types
    assert ours["tagged"] == ["5", "yes", "x"]
    assert ours["mixed"] == ["10.0.0.0/16", 5, True, None, 1.5]
