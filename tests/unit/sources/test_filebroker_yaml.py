"""The file broker reads its documents with libyaml's parser (docs/performance.md) and words errors as before."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from magw.snapshot.yamlstrict import FastStrictLoader, StrictLoader
from magw.sources.file import documents
from magw.sources.file.documents import DocumentError, parse_file

GOOD = "kind: Cluster\nid: east\ncidrs: [10.1.0.0/16]\n---\nkind: Node\ncluster: east\nname: e-w1\nip: 172.18.0.3\n"


@pytest.mark.skipif(FastStrictLoader is StrictLoader, reason="PyYAML here was built without libyaml")
def test_documents_are_read_by_the_c_loader(monkeypatch: pytest.MonkeyPatch) -> None:
    """A good file goes through FastStrictLoader (libyaml) once, and never through the pure-Python loader."""
    used: list[Any] = []
    load_all = yaml.load_all

    def spy(text: str, Loader: Any) -> Any:
        used.append(Loader)
        return load_all(text, Loader=Loader)

    monkeypatch.setattr(documents.yaml, "load_all", spy)
    docs = parse_file(GOOD, file="east.yaml")
    assert [d.ident for d in docs] == [("Cluster", "east"), ("Node", "east", "e-w1")]
    assert used == [FastStrictLoader]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kind: Cluster\nid: east\nid: west\n", "east.yaml:3: duplicate key 'id'"),
        ("kind: Cluster\nid: [east\n", "east.yaml:3: expected ',' or ']', but got '<stream end>'"),
        ("kind: Cluster\n  id: east\n", "east.yaml:2: mapping values are not allowed here"),
    ],
)
def test_errors_name_the_line_as_the_python_loader_does(text: str, message: str) -> None:
    """Duplicate keys and syntax errors: one line with the file, the line and the Python loader's words."""
    with pytest.raises(DocumentError) as err:
        parse_file(text, file="east.yaml")
    assert str(err.value) == message
