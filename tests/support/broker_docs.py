"""Broker documents the tests share: the files of tests/data/broker/ (the conftest's ``broker_documents``
fixture), an egress VIP document, and a byte-exact picture of a broker directory."""

from __future__ import annotations

from pathlib import Path

from tests.support.paths import DATA

BROKER_DATA = DATA / "broker"


class BrokerDocuments:
    """The documents of tests/data/broker/ by file name: ``broker_documents("egress-east.yaml")`` is its text.

    ``clusters-east-west.yaml``: clusters east (10.1.0.0/16) and west (10.2.0.0/16), nothing else.
    ``egress-east.yaml``: cluster east with nodes n1 and n2, an EgressConfig (VIPs from 192.0.2.0/24), namespaces
    shop and blog, and Services shop/web, shop/db and blog/api.
    """

    def __call__(self, name: str) -> str:
        return (BROKER_DATA / name).read_text()


broker_document = BrokerDocuments()


def egress_vip(name: str, last: int, bindings: str = "[]") -> str:
    """An EgressVIP of cluster east at 192.0.2.<last> (VRID ``last``), candidates n1 and n2, with ``bindings``."""
    return (
        f"kind: EgressVIP\ncluster: east\nname: {name}\nvip: 192.0.2.{last}\nvrid: {last}\n"
        f"candidates: [n1, n2]\nbindings: {bindings}\n"
    )


def files(directory: Path) -> dict[str, bytes]:
    """Every file of ``directory`` by name, as bytes: equal before and after means nothing was written."""
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}
