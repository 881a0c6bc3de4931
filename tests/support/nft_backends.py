"""FakeNft and the real NftDriver behind one test interface, for the contract suites that run the same cases on both.

Each suite has a fixture ``backend`` (params ``BACKENDS``) that opens ``open_backend(request.param)``:
``FakeNft``, or ``NftDriver`` in a throwaway namespace that records every document it sends
(``nft.sent``) and every element batch it sends as its own nfnetlink messages (``nfnl.sent``), so a case
can check what a transaction carried. ``kernel-libnftables`` is the kernel with element changes sent
through libnftables too (``NftDriver(raw_elements=False)``): the element contract runs on all three. An
independent checker (``nft -j list`` through the nft command, not our binding) confirms what the driver's own
``observe()`` says.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

import pytest

from magw.desired.nft.values import NftChain, NftTable
from magw.drivers.netlink.nlattr import attrs_of
from magw.drivers.nft import NftDriver
from magw.drivers.nft.fake.ruleset import FakeNft
from magw.drivers.nft.libnft import Nft
from magw.drivers.nft.nfelems import NFT_MSG_NEWSETELEM, NFTA_SET_ELEM_LIST_SET
from magw.drivers.nft.nfnl import NfnlSocket
from magw.reconcile.changeset import NftChange
from magw.reconcile.driver import ApplyResult
from tests.support.netns import netns

BACKENDS = ["fake", pytest.param("kernel", marks=pytest.mark.kernel)]
ELEMENT_BACKENDS = [*BACKENDS, pytest.param("kernel-libnftables", marks=pytest.mark.kernel)]

# ---- rule expressions --------------------------------------------------------------------------------------


def expr(*stmts: dict[str, Any]) -> str:
    return json.dumps(list(stmts), sort_keys=True)


def saddr() -> dict[str, Any]:
    return {"payload": {"protocol": "ip", "field": "saddr"}}


def daddr() -> dict[str, Any]:
    return {"payload": {"protocol": "ip", "field": "daddr"}}


def in_set(left: dict[str, Any], name: str) -> dict[str, Any]:
    return {"match": {"op": "==", "left": left, "right": f"@{name}"}}


ACCEPT = {"accept": None}

# Base and regular chains the contract cases build their tables from.
POST = NftChain(name="postrouting", type="nat", hook="postrouting", priority=90, policy="accept")
FWD = NftChain(name="forward", type="filter", hook="forward", priority=0, policy="accept")
SUB = NftChain(name="sub")


# ---- the two backends --------------------------------------------------------------------------------------


class Backend(Protocol):
    driver: FakeNft | NftDriver

    def install_foreign(self, table: NftTable) -> None: ...

    def listing(self, family: str, name: str) -> dict[str, Any] | None:
        """An independent summary of a table: chains, rules (chain, comment) in order, set elements."""
        ...


def summary(chains: list[str], rules: list[tuple[str, str | None]], sets: dict[str, list[str]]) -> dict[str, Any]:
    return {"chains": sorted(chains), "rules": rules, "sets": {k: sorted(v) for k, v in sets.items()}}


class FakeBackend:
    def __init__(self) -> None:
        self.driver = FakeNft()

    def install_foreign(self, table: NftTable) -> None:
        self.driver.add_foreign(table)

    def listing(self, family: str, name: str) -> dict[str, Any] | None:
        t = self.driver.table(family, name)
        if t is None:
            return None
        return summary(
            [c.name for c in t.chains],
            [(r.chain, r.comment) for r in t.rules],
            {s.name: list(s.elements) for s in t.sets} | {m.name: [f"{k}|{v}" for k, v in m.elements] for m in t.maps},
        )


def cli_element(value: Any) -> str:
    """Element text from nft's own JSON, written independently of the driver's converter."""
    if isinstance(value, list):  # a map element: [key, value]
        return f"{cli_element(value[0])}|{cli_element(value[1])}"
    if isinstance(value, dict):
        (key, inner), *_ = value.items()
        key = str(key)
        if key == "prefix":
            return f"{inner['addr']}/{inner['len']}"
        if key == "range":
            return f"{inner[0]}-{inner[1]}"
        if key == "concat":
            return " . ".join(cli_element(v) for v in inner)
        if key in ("jump", "goto"):
            return f"{key} {inner['target']}"
        return key
    return str(value)


class RecordingNft(Nft):
    """libnftables in a namespace, keeping every command it runs (``sent``): what a transaction carried."""

    def __init__(self, netns: str | None = None) -> None:
        super().__init__(netns)
        self.sent: list[str] = []

    def run(self, command: str | bytes) -> str:
        self.sent.append(command.decode() if isinstance(command, bytes) else command)  # the driver sends bytes
        return super().run(command)


class RecordingNfnl(NfnlSocket):
    """Our nfnetlink element batches, each kept as ``(verb, set name)`` per request (``sent``)."""

    def __init__(self, netns: str | None = None) -> None:
        super().__init__(netns)
        self.sent: list[list[tuple[str, str]]] = []

    def transaction(self, requests: Sequence[tuple[int, bytes]]) -> str | None:
        batch = []
        for kind, body in requests:
            name = attrs_of(body, 4)[NFTA_SET_ELEM_LIST_SET].rstrip(b"\0").decode()  # after struct nfgenmsg
            batch.append(("add" if kind & 0xFF == NFT_MSG_NEWSETELEM else "delete", name))
        self.sent.append(batch)
        return super().transaction(requests)


class KernelBackend:
    def __init__(self, ns: str, *, raw_elements: bool = True) -> None:
        self.ns = ns
        self.nft = RecordingNft(ns)
        self.nfnl = RecordingNfnl(ns) if raw_elements else None
        self.driver = NftDriver(ns, nft=self.nft, raw_elements=raw_elements, element_socket=self.nfnl)

    def nft_cli(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        """The nft command in the namespace: a checker independent of our binding."""
        cmd = ["ip", "netns", "exec", self.ns, "nft", *args]
        return subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=30, check=False)

    def install_foreign(self, table: NftTable) -> None:
        from magw.drivers.nft.codec import document, replace_commands

        done = self.nft_cli("-j", "-f", "-", stdin=json.dumps(document(replace_commands(table))))
        assert done.returncode == 0, done.stderr

    def listing(self, family: str, name: str) -> dict[str, Any] | None:
        done = self.nft_cli("-j", "list", "table", family, name)
        if done.returncode != 0:
            assert "No such file or directory" in done.stderr
            return None
        items = json.loads(done.stdout)["nftables"]
        chains = [i["chain"]["name"] for i in items if "chain" in i]
        rules = [(i["rule"]["chain"], i["rule"].get("comment")) for i in items if "rule" in i]
        sets = {
            i[k]["name"]: [cli_element(e) for e in i[k].get("elem", [])]
            for i in items
            for k in ("set", "map")
            if k in i
        }
        return summary(chains, rules, sets)


def expected_listing(table: NftTable) -> dict[str, Any]:
    sets: dict[str, list[str]] = {s.name: list(s.elements) for s in table.sets}
    sets |= {m.name: [f"{k}|{v}" for k, v in m.elements] for m in table.maps}
    return summary([c.name for c in table.chains], [(r.chain, r.comment) for r in table.rules], sets)


@contextlib.contextmanager
def open_backend(kind: str) -> Iterator[FakeBackend | KernelBackend]:
    """A fresh backend of ``kind`` ("fake", "kernel" or "kernel-libnftables"); the kernel's namespace is removed
    afterwards."""
    if kind == "fake":
        yield FakeBackend()
        return
    with netns("magwt-nft") as ns:
        kernel = KernelBackend(ns, raw_elements=kind == "kernel")
        try:
            yield kernel
        finally:
            kernel.driver.close()


def replace(table: NftTable) -> NftChange:
    return NftChange(family=table.family, name=table.name, table=table)


def delete(family: str = "ip", name: str = "magw") -> NftChange:
    return NftChange(family=family, name=name, table=None)


def apply_ok(backend: Backend, *changes: NftChange) -> None:
    result = backend.driver.apply(changes)
    assert [f.describe() for f in result.failed] == []
    assert result.applied == changes


def apply_fails(backend: Backend, change: NftChange) -> ApplyResult:
    result = backend.driver.apply([change])
    assert (result.applied, [f.op for f in result.failed]) == ((), [change])
    return result
