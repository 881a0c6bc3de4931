"""Element-level nft changes, one contract for FakeNft and NftDriver: the same cases, the same outcomes.

An element change (``NftChange(elements=...)``, what ``nft_changes`` gives when only set/map elements
differ) is one transaction of ``delete element``/``add element`` commands: the table, its rules and
the other elements stay. Each case runs on the fake and on the kernel in a throwaway namespace
(tests/support/nft_backends.py); the kernel backend records what its driver sent.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import attrs
import pytest

from magw.cli.sync import sync
from magw.desired.nft.values import NftChain, NftMap, NftRule, NftSet, NftTable
from magw.desired.state import DesiredState
from magw.drivers.netlink.fake.namespace import FakeNetlink
from magw.drivers.nft import NftDriver, nfelems
from magw.drivers.nft.driver import transaction, transaction_text
from magw.drivers.node import NodeDriver
from magw.reconcile.changeset import NftChange
from magw.reconcile.diff import nft_changes
from magw.reconcile.nftdelta import MapDelta, NftElementDelta, SetDelta
from tests.support.nft_backends import (
    ACCEPT,
    ELEMENT_BACKENDS,
    FWD,
    POST,
    SUB,
    Backend,
    FakeBackend,
    KernelBackend,
    RecordingNfnl,
    RecordingNft,
    apply_fails,
    apply_ok,
    daddr,
    expected_listing,
    expr,
    in_set,
    open_backend,
    replace,
    saddr,
)

SUB2 = NftChain(name="sub2")
PODS = NftSet(name="gn_in", type="ipv4_addr", elements=("10.1.0.5", "10.1.0.6", "10.1.0.7"))
CIDRS = NftSet(name="cidrs", type="ipv4_addr", flags=("interval",), elements=("10.0.0.0/16", "192.168.1.1"))
EGRESS = NftMap(
    name="gn_egress",
    type="ipv4_addr",
    map="ipv4_addr",
    elements=(("10.1.0.5", "169.254.1.5"), ("10.1.0.6", "169.254.1.6")),
)
RANGES = NftMap(
    name="ns_egress", type="ipv4_addr", map="ipv4_addr", flags=("interval",), elements=(("10.2.0.0/16", "169.254.2.1"),)
)
DISPATCH = NftMap(name="dispatch", type="ipv4_addr", map="verdict", elements=(("10.3.0.1", "accept"),))
TABLE = NftTable(
    family="ip",
    name="magw",
    sets=(PODS, CIDRS),
    maps=(EGRESS, RANGES, DISPATCH),
    chains=(FWD, POST, SUB, SUB2),
    rules=(
        NftRule(chain="forward", expr=expr(in_set(saddr(), "gn_in"), in_set(daddr(), "cidrs"), ACCEPT)),
        NftRule(chain="forward", expr=expr({"jump": {"target": "sub"}})),
        NftRule(chain="sub", expr=expr({"vmap": {"key": daddr(), "data": "@dispatch"}})),
        NftRule(
            chain="postrouting",
            expr=expr(
                in_set(saddr(), "gn_egress"), {"snat": {"addr": {"map": {"key": saddr(), "data": "@gn_egress"}}}}
            ),
            comment="globalnet egress",
        ),
        NftRule(
            chain="postrouting",
            expr=expr({"snat": {"addr": {"map": {"key": saddr(), "data": "@ns_egress"}}}}),
            comment="namespace egress",
        ),
    ),
)


@pytest.fixture(params=ELEMENT_BACKENDS)
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    with open_backend(request.param) as opened:
        yield opened


def _elements(table: NftTable, **changes: Any) -> NftTable:
    """``table`` with the named sets' or maps' elements replaced."""
    sets = [attrs.evolve(s, elements=changes.get(s.name, s.elements)) for s in table.sets]
    maps = [attrs.evolve(m, elements=changes.get(m.name, m.elements)) for m in table.maps]
    return attrs.evolve(table, sets=sets, maps=maps)


def _element_change(desired: NftTable, observed: NftTable) -> NftChange:
    (change,) = nft_changes(desired, observed)
    assert change.elements is not None
    return change


def _commands(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """(verb, object) of every command in a libnftables document: ("delete", "element")..."""
    return [(verb, next(iter(body))) for cmd in doc["nftables"] for verb, body in cmd.items()]


def _writes(recorder: RecordingNft | None, nfnl: RecordingNfnl | None = None) -> list[list[tuple[str, str]]]:
    """The commands of every document a recorded driver sent that was not a listing, then each nfnetlink element
    batch it sent itself, as ``(verb, "element")`` per request."""
    if recorder is None:
        return []
    docs = [json.loads(text) for text in recorder.sent if text.lstrip().startswith("{")]
    writes = [cmds for cmds in map(_commands, docs) if any(verb != "list" for verb, _ in cmds)]
    return writes + [[(verb, "element") for verb, _ in batch] for batch in (nfnl.sent if nfnl is not None else ())]


def _sent_writes(backend: Backend) -> list[list[tuple[str, str]]]:
    return _writes(backend.nft, backend.nfnl) if isinstance(backend, KernelBackend) else []


def _raw_batches(backend: Backend) -> int:
    return len(backend.nfnl.sent) if isinstance(backend, KernelBackend) and backend.nfnl is not None else 0


def _applied_as(backend: Backend, change: NftChange, expected: NftTable) -> None:
    """``change`` applies, the table reads back as ``expected`` (also through nft itself), and the kernel
    got exactly one transaction of element commands for it: our own nfnetlink batch when the driver sends
    those and can write the change so (``nfelems.expressible``), else a libnftables document."""
    before, raw_before = len(_sent_writes(backend)), _raw_batches(backend)
    apply_ok(backend, change)
    assert backend.driver.observe() == expected
    assert backend.listing("ip", "magw") == expected_listing(expected)
    if isinstance(backend, KernelBackend):
        (sent,) = _sent_writes(backend)[before:]
        assert {obj for _, obj in sent} == {"element"}, sent
        assert change.table is not None and change.elements is not None
        raw = backend.nfnl is not None and nfelems.expressible(change.table, change.elements)
        assert _raw_batches(backend) - raw_before == int(raw)


# ---- the transaction itself (pure) -------------------------------------------------------------------------


def test_an_element_transaction_has_only_element_commands_deletes_first() -> None:
    """No add/delete table, chain, set or rule: only element commands, every delete before every add."""
    desired = _elements(
        TABLE,
        gn_in=("10.1.0.6", "10.1.0.8"),
        cidrs=("10.0.0.0/15", "192.168.1.1"),
        gn_egress=(("10.1.0.5", "169.254.1.9"), ("10.1.0.6", "169.254.1.6")),
        dispatch=(("10.3.0.1", "jump sub2"),),
    )
    commands = _commands(transaction(_element_change(desired, TABLE)))
    assert commands == [("delete", "element")] * 4 + [("add", "element")] * 4


def test_a_map_delete_names_the_key_only_and_an_add_the_new_pair() -> None:
    """The kernel deletes a map element by key: the old value is not sent, the new pair is."""
    desired = _elements(TABLE, gn_egress=(("10.1.0.5", "169.254.1.9"), ("10.1.0.6", "169.254.1.6")))
    doc = transaction(_element_change(desired, TABLE))
    assert doc == {
        "nftables": [
            {"delete": {"element": {"family": "ip", "table": "magw", "name": "gn_egress", "elem": ["10.1.0.5"]}}},
            {
                "add": {
                    "element": {
                        "family": "ip",
                        "table": "magw",
                        "name": "gn_egress",
                        "elem": [["10.1.0.5", "169.254.1.9"]],
                    }
                }
            },
        ]
    }


def test_the_text_the_driver_sends_is_the_transaction() -> None:
    """``transaction_text`` (what is sent, built without a dict per element) parses to ``transaction``."""
    desired = _elements(
        TABLE,
        gn_in=("10.1.0.6", "10.1.0.8"),
        cidrs=("10.0.0.0/17", "10.0.128.0/17", "10.9.0.1-10.9.0.7"),
        ns_egress=(("10.2.0.0/16", "169.254.2.9"),),
        dispatch=(("10.3.0.1", "jump sub2"), ("10.3.0.2", "drop")),
    )
    change = _element_change(desired, TABLE)
    for checked in (False, True):
        assert json.loads(transaction_text(change, checked=checked)) == transaction(change)


# ---- the contract ------------------------------------------------------------------------------------------


def test_set_elements_added_and_removed(backend: Backend) -> None:
    """Pods come and go: one transaction of element commands, the table reads back as desired."""
    apply_ok(backend, replace(TABLE))
    desired = _elements(TABLE, gn_in=("10.1.0.6", "10.1.0.8", "10.1.0.9"))
    _applied_as(backend, _element_change(desired, TABLE), desired)


def test_map_value_change(backend: Backend) -> None:
    """A pod's global IP changes, another pod is added: delete of the old pair, add of the new ones."""
    apply_ok(backend, replace(TABLE))
    desired = _elements(
        TABLE, gn_egress=(("10.1.0.5", "169.254.1.50"), ("10.1.0.6", "169.254.1.6"), ("10.1.0.7", "169.254.1.7"))
    )
    _applied_as(backend, _element_change(desired, TABLE), desired)


def test_verdict_and_interval_map_value_change(backend: Backend) -> None:
    """A verdict map element becomes a jump, an interval map's prefix keeps its key and changes its value."""
    apply_ok(backend, replace(TABLE))
    desired = _elements(
        TABLE,
        dispatch=(("10.3.0.1", "jump sub2"), ("10.3.0.2", "drop")),
        ns_egress=(("10.2.0.0/16", "169.254.2.9"),),
    )
    _applied_as(backend, _element_change(desired, TABLE), desired)


@pytest.mark.parametrize(
    "cidrs",
    [
        ("10.0.0.0/15", "192.168.1.1"),
        ("10.0.0.0/17", "10.0.128.0/17", "192.168.1.0/24"),
        ("10.0.0.0/8",),
    ],
    ids=["widen", "split", "cover-all"],
)
def test_interval_replace_in_one_transaction(backend: Backend, cidrs: tuple[str, ...]) -> None:
    """A prefix replaced by an overlapping one (wider, split, covering others): delete then add in one
    transaction is accepted by the kernel (the other order is "interval overlaps with an existing one")."""
    apply_ok(backend, replace(TABLE))
    desired = _elements(TABLE, cidrs=cidrs)
    _applied_as(backend, _element_change(desired, TABLE), desired)


def test_an_empty_element_change_is_a_no_op(backend: Backend) -> None:
    """A delta with nothing in it succeeds and sends nothing (nft refuses an empty element list)."""
    apply_ok(backend, replace(TABLE))
    before = _sent_writes(backend)
    apply_ok(backend, NftChange(family="ip", name="magw", table=TABLE, elements=NftElementDelta()))
    assert backend.driver.observe() == TABLE
    assert _sent_writes(backend) == before


def _pods_delta(*, add: tuple[str, ...] = (), delete: tuple[str, ...] = ()) -> NftChange:
    delta = NftElementDelta(sets=(SetDelta(name="gn_in", type="ipv4_addr", add=add, delete=delete),))
    return NftChange(family="ip", name="magw", table=TABLE, elements=delta)


def test_deleting_a_missing_element_fails_the_whole_transaction(backend: Backend) -> None:
    """The kernel refuses a delete of an element that is not there (ENOENT), and the add beside it too."""
    apply_ok(backend, replace(TABLE))
    result = apply_fails(backend, _pods_delta(add=("10.1.0.20",), delete=("10.1.0.99",)))
    assert "No such file or directory" in result.failed[0].error
    assert backend.driver.observe() == TABLE


def test_adding_an_element_that_is_there_is_no_change(backend: Backend) -> None:
    """An add of an element already in the set succeeds and leaves the set as it was."""
    apply_ok(backend, replace(TABLE))
    apply_ok(backend, _pods_delta(add=("10.1.0.5",)))
    assert backend.driver.observe() == TABLE


def test_adding_a_map_key_with_another_value_fails(backend: Backend) -> None:
    """A map key added with another value than it has, without deleting it first: "File exists"."""
    apply_ok(backend, replace(TABLE))
    delta = NftElementDelta(
        maps=(MapDelta(name="gn_egress", type="ipv4_addr", map="ipv4_addr", add=(("10.1.0.5", "169.254.1.99"),)),)
    )
    result = apply_fails(backend, NftChange(family="ip", name="magw", table=TABLE, elements=delta))
    assert "File exists" in result.failed[0].error
    assert backend.driver.observe() == TABLE


@pytest.mark.parametrize(
    ("add", "delete"),
    [(("10.0.0.0/15",), ()), (("10.0.1.0/24",), ()), ((), ("10.0.0.0/24",)), ((), ("10.0.0.1",))],
    ids=["add-wider", "add-inside", "delete-part", "delete-address-inside"],
)
def test_intervals_must_not_overlap_and_are_deleted_whole(
    backend: Backend, add: tuple[str, ...], delete: tuple[str, ...]
) -> None:
    """Adding a prefix that overlaps one still there is refused; an interval is deleted exactly as it is
    (a part of it, or an address inside it, "does not exist")."""
    apply_ok(backend, replace(TABLE))
    delta = NftElementDelta(sets=(SetDelta(name="cidrs", type="ipv4_addr", interval=True, add=add, delete=delete),))
    apply_fails(backend, NftChange(family="ip", name="magw", table=TABLE, elements=delta))
    assert backend.driver.observe() == TABLE


@pytest.mark.parametrize(
    ("verdict", "cause"),
    [
        ("jump nope", ("No such file or directory", "ENOENT")),
        ("jump forward", ("Operation not supported", "EOPNOTSUPP")),
        ("jump sub", ("Too many links",)),
    ],
    ids=["missing-chain", "base-chain", "loop"],
)
def test_a_verdict_element_is_checked_like_a_rule(backend: Backend, verdict: str, cause: tuple[str, ...]) -> None:
    """A verdict-map element added to a live table: a jump to a missing chain, to a base chain, or one that
    closes a loop (sub -> @dispatch -> sub) is refused as in a whole table."""
    apply_ok(backend, replace(TABLE))
    delta = NftElementDelta(
        maps=(MapDelta(name="dispatch", type="ipv4_addr", map="verdict", add=(("10.3.0.9", verdict),)),)
    )
    result = apply_fails(backend, NftChange(family="ip", name="magw", table=TABLE, elements=delta))
    assert any(text in result.failed[0].error for text in cause), result.failed[0].error
    assert backend.driver.observe() == TABLE


def test_an_unparsable_element_is_refused_before_libnftables(backend: Backend) -> None:
    """A host name as an address is refused by preflight (nft would resolve it through DNS)."""
    apply_ok(backend, replace(TABLE))
    result = apply_fails(backend, _pods_delta(add=("gateway.example",)))
    assert "is not an IPv4 address" in result.failed[0].error
    assert backend.driver.observe() == TABLE


def test_an_element_change_on_a_missing_table_fails(backend: Backend) -> None:
    """No table: the element change is refused and creates nothing."""
    apply_fails(backend, _pods_delta(add=("10.1.0.20",)))
    assert (backend.driver.observe(), backend.listing("ip", "magw")) == (None, None)


def test_an_element_change_naming_a_set_its_table_lacks_is_refused(backend: Backend) -> None:
    """The delta must name the sets of ``change.table`` with their types: otherwise nothing is sent."""
    apply_ok(backend, replace(TABLE))
    delta = NftElementDelta(sets=(SetDelta(name="nope", type="ipv4_addr", add=("10.1.0.20",)),))
    result = apply_fails(backend, NftChange(family="ip", name="magw", table=TABLE, elements=delta))
    assert "set nope" in result.failed[0].error
    assert backend.driver.observe() == TABLE


def test_after_drift_a_failed_element_change_heals_on_the_next_observe(backend: Backend) -> None:
    """Someone removed an element behind our back: the delta from the stale view fails (ENOENT) and
    changes nothing; a diff against what is observed now gives a delta that works."""
    apply_ok(backend, replace(TABLE))
    drifted = _elements(TABLE, gn_in=("10.1.0.6", "10.1.0.7"))
    apply_ok(backend, _element_change(drifted, TABLE))
    desired = _elements(TABLE, gn_in=("10.1.0.6", "10.1.0.8"))
    apply_fails(backend, _element_change(desired, TABLE))  # believes 10.1.0.5 is still there
    observed = backend.driver.observe()
    assert observed == drifted
    _applied_as(backend, _element_change(desired, observed), desired)


# ---- a restart never flushes -------------------------------------------------------------------------------


def _restarted(backend: Backend) -> tuple[NodeDriver, RecordingNft | None, RecordingNfnl | None]:
    """A node driver as a restarted agent makes it: a fresh nft driver on the same kernel (or fake)."""
    if isinstance(backend, FakeBackend):
        return NodeDriver(netlink=FakeNetlink(), nft=backend.driver), None, None
    recorder = RecordingNft(backend.ns)
    nfnl = RecordingNfnl(backend.ns) if backend.nfnl is not None else None
    driver = NftDriver(backend.ns, nft=recorder, raw_elements=nfnl is not None, element_socket=nfnl)
    return NodeDriver(netlink=FakeNetlink(), nft=driver), recorder, nfnl


def test_a_restart_on_an_unchanged_table_sends_nothing(backend: Backend) -> None:
    """A sync after a restart, with the kernel already holding the desired table: no change, nothing sent."""
    apply_ok(backend, replace(TABLE))
    node, recorder, nfnl = _restarted(backend)
    try:
        report = sync(node, DesiredState(nft=TABLE), dry_run=False, out=io.StringIO())
        assert report.changes == ()
        assert _writes(recorder, nfnl) == []
        assert backend.driver.observe() == TABLE
    finally:
        for sock in (recorder, nfnl):
            if sock is not None:
                sock.close()


def test_a_restart_with_changed_pods_sends_only_element_commands(backend: Backend) -> None:
    """A sync after a restart while pods changed: one element change, never ``delete table``."""
    apply_ok(backend, replace(TABLE))
    desired = _elements(
        TABLE, gn_in=("10.1.0.5", "10.1.0.9"), gn_egress=(("10.1.0.5", "169.254.1.5"), ("10.1.0.9", "169.254.1.9"))
    )
    node, recorder, nfnl = _restarted(backend)
    try:
        out = io.StringIO()
        report = sync(node, DesiredState(nft=desired), dry_run=False, out=out)
        assert [c.elements is not None for c in report.changes if isinstance(c, NftChange)] == [True]
        assert report.result.failed == ()
        assert backend.driver.observe() == desired
        if recorder is not None:
            (sent,) = _writes(recorder, nfnl)
            assert {obj for _, obj in sent} == {"element"}, sent
    finally:
        for sock in (recorder, nfnl):
            if sock is not None:
                sock.close()


def _holds(backend: Backend, set_name: str, element: str) -> bool:
    """Whether the set holds ``element``: a point lookup (``nft get element``) on the kernel.

    Not a listing: a dump of a large hash set made while the kernel still resizes it after a bulk
    insert misses elements (measured: 5 of 40 listings of a fresh 20,000-element set came back short).
    """
    if isinstance(backend, KernelBackend):
        done = backend.nft_cli("get", "element", "ip", "magw", set_name, f"{{ {element} }}")
        return done.returncode == 0
    table = backend.driver.observe()
    return table is not None and element in next(s.elements for s in table.sets if s.name == set_name)


def test_a_few_pods_in_a_large_set_send_a_few_elements(backend: Backend) -> None:
    """20,000 pods, three change: the transaction names only those three (a replace would send 20,000),
    and the kernel holds the new pod and not the two gone ones."""
    pods = tuple(f"10.1.{i >> 8}.{i & 255}" for i in range(20_000))
    big = _elements(TABLE, gn_in=pods)
    apply_ok(backend, replace(big))
    desired = _elements(big, gn_in=(*pods[2:], "10.200.0.1"))
    change = _element_change(desired, big)
    assert change.elements is not None and (change.elements.added, change.elements.deleted) == (1, 2)
    assert len(json.dumps(transaction(change))) < 1000
    apply_ok(backend, change)
    holds = [_holds(backend, "gn_in", e) for e in (pods[0], pods[1], pods[2], pods[-1], "10.200.0.1")]
    assert holds == [False, False, True, True, True]


# ---- what our own nfnetlink batches must also get right (nfelems) -----------------------------------------


def test_an_interval_map_changes_value_and_gains_a_range(backend: Backend) -> None:
    """An interval map (no verdicts, so our own batch on the kernel): a prefix keeps its key and changes its
    value, a range and a prefix are added."""
    apply_ok(backend, replace(TABLE))
    desired = _elements(
        TABLE,
        ns_egress=(
            ("10.2.0.0/16", "169.254.2.9"),
            ("10.4.0.1-10.4.0.9", "169.254.2.4"),
            ("10.5.0.0/24", "169.254.2.5"),
        ),
    )
    _applied_as(backend, _element_change(desired, TABLE), desired)


@pytest.mark.parametrize("top", ["240.0.0.0/4", "255.255.255.255", "250.0.0.1-255.255.255.255"])
def test_an_interval_that_reaches_the_last_address_comes_and_goes(backend: Backend, top: str) -> None:
    """An interval ending at 255.255.255.255 has no end element in the kernel (nft marks its start as open):
    added, it reads back as written; deleted, nothing of it is left."""
    apply_ok(backend, replace(TABLE))
    wide = _elements(TABLE, cidrs=(*CIDRS.elements, top))
    _applied_as(backend, _element_change(wide, TABLE), wide)
    _applied_as(backend, _element_change(TABLE, wide), TABLE)


def test_an_interval_beside_address_zero_comes_and_goes(backend: Backend) -> None:
    """nft opens an interval set with an end element at 0.0.0.0; a prefix starting there is a start element of
    the same key beside it, added and deleted like any other."""
    apply_ok(backend, replace(TABLE))
    low = _elements(TABLE, cidrs=("0.0.0.0/8", *CIDRS.elements))
    _applied_as(backend, _element_change(low, TABLE), low)
    _applied_as(backend, _element_change(TABLE, low), TABLE)


def _many_prefixes(count: int) -> tuple[str, ...]:
    return tuple(f"11.{i >> 8}.{i & 255}.0/24" for i in range(count))


def test_a_change_over_many_messages_is_one_transaction(backend: Backend) -> None:
    """8,000 prefixes are more than one message's element list holds (a 16-bit attribute length): our batch
    carries several messages, and still commits as one, all or nothing."""
    apply_ok(backend, replace(TABLE))
    many = _many_prefixes(8000)
    if isinstance(backend, KernelBackend) and backend.nfnl is not None:
        change = _element_change(_elements(TABLE, cidrs=(*CIDRS.elements, *many)), TABLE)
        assert change.elements is not None
        assert len(nfelems.requests("ip", "magw", change.elements)) > 1
    # The last prefix overlaps one already there, so the last message fails: nothing of the others stays.
    clash = NftElementDelta(
        sets=(SetDelta(name="cidrs", type="ipv4_addr", interval=True, add=(*many, "10.0.128.0/17")),),
    )
    result = apply_fails(backend, NftChange(family="ip", name="magw", table=TABLE, elements=clash))
    assert result.failed[0].error
    assert backend.driver.observe() == TABLE
    wide = _elements(TABLE, cidrs=(*CIDRS.elements[:1], *many, *CIDRS.elements[1:]))
    _applied_as(backend, _element_change(wide, TABLE), wide)
