"""One contract for FakeNft and the real NftDriver: the same cases, the same outcomes.

Every test runs twice: against ``FakeNft`` and against ``NftDriver`` in a
throwaway namespace (marked ``kernel``). For the kernel, an independent checker
(``nft -j list`` through the nft command, not our binding) confirms what the
driver's own ``observe()`` says.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any, Protocol

import pytest

from magw.desired.nft import NftChain, NftMap, NftRule, NftSet, NftTable
from magw.drivers.fake_nft import FakeNft
from magw.drivers.nft import NftDriver
from magw.reconcile.changeset import NftChange
from magw.reconcile.driver import ApplyResult
from tests.netns import netns

# ---- tables used by the cases ------------------------------------------------------------------------------


def _expr(*stmts: dict[str, Any]) -> str:
    return json.dumps(list(stmts), sort_keys=True)


def _saddr() -> dict[str, Any]:
    return {"payload": {"protocol": "ip", "field": "saddr"}}


def _daddr() -> dict[str, Any]:
    return {"payload": {"protocol": "ip", "field": "daddr"}}


def _in_set(left: dict[str, Any], name: str) -> dict[str, Any]:
    return {"match": {"op": "==", "left": left, "right": f"@{name}"}}


ACCEPT = {"accept": None}
POST = NftChain(name="postrouting", type="nat", hook="postrouting", priority=90, policy="accept")
FWD = NftChain(name="forward", type="filter", hook="forward", priority=0, policy="accept")
SUB = NftChain(name="sub")
LOCAL = NftSet(name="local_cidrs", type="ipv4_addr", flags=("interval",), elements=("10.1.0.0/16", "100.1.0.0/16"))
REMOTE = NftSet(name="remote_cidrs", type="ipv4_addr", flags=("interval",), elements=("10.2.0.0/16",))
NULL_SNAT = NftRule(
    chain="postrouting",
    expr=_expr(_in_set(_saddr(), "local_cidrs"), _in_set(_daddr(), "remote_cidrs"), {"snat": {"addr": _saddr()}}),
    comment="keep-src",
)
FWD_ACCEPT = NftRule(chain="forward", expr=_expr(_in_set(_daddr(), "remote_cidrs"), ACCEPT), comment="fwd")
T1 = NftTable(family="ip", name="magw", sets=(LOCAL, REMOTE), chains=(POST, FWD), rules=(NULL_SNAT, FWD_ACCEPT))

REMOTE2 = NftSet(name="remote_cidrs", type="ipv4_addr", flags=("interval",), elements=("10.3.0.0/16", "10.4.0.1"))
FWD_COUNT = NftRule(
    chain="forward",
    expr=_expr(_in_set(_saddr(), "remote_cidrs"), {"counter": {"packets": 0, "bytes": 0}}, ACCEPT),
    comment="fwd2",
)
T2 = NftTable(family="ip", name="magw", sets=(LOCAL, REMOTE2), chains=(POST, FWD), rules=(FWD_COUNT, NULL_SNAT))

CNI = NftTable(
    family="ip",
    name="cni",
    chains=(NftChain(name="post", type="nat", hook="postrouting", priority=100, policy="accept"),),
    rules=(
        NftRule(
            chain="post",
            expr=_expr(
                {"match": {"op": "==", "left": _saddr(), "right": {"prefix": {"addr": "10.1.0.0", "len": 16}}}},
                {"masquerade": None},
            ),
        ),
    ),
)

MAPS = NftTable(
    family="ip",
    name="magw",
    sets=(
        NftSet(name="ports", type="inet_service", elements=("4500", "4800")),
        NftSet(name="marks", type="mark", elements=("786432",)),
        NftSet(name="ifaces", type="ifname", elements=("vxlan-tunnel", "vx-submariner")),
        NftSet(name="macs", type="ether_addr", elements=("02:53:f0:12:00:06",)),
        NftSet(name="pairs", type="ipv4_addr . inet_service", elements=("10.0.0.1 . 80", "10.0.0.2 . 443")),
        NftSet(name="ranges", type="inet_service", flags=("interval",), elements=("1000-2000", "80")),
        LOCAL,
    ),
    maps=(
        NftMap(name="egress_ip", type="ipv4_addr", map="ipv4_addr", elements=(("10.1.1.5", "169.254.10.1"),)),
        NftMap(
            name="ns_egress",
            type="ipv4_addr",
            map="ipv4_addr",
            flags=("interval",),
            elements=(("10.1.2.0/24", "169.254.10.2"), ("10.1.3.7", "169.254.10.3")),
        ),
        NftMap(
            name="dispatch",
            type="ipv4_addr",
            map="verdict",
            elements=(("10.2.0.1", "accept"), ("10.2.0.2", "jump sub"), ("10.2.0.3", "drop")),
        ),
    ),
    chains=(POST, FWD, SUB),
    rules=(
        NftRule(
            chain="postrouting",
            expr=_expr(
                {"match": {"op": "==", "left": _saddr(), "right": "@egress_ip"}},
                {"snat": {"addr": {"map": {"key": _saddr(), "data": "@egress_ip"}}}},
            ),
            comment="globalnet egress",
        ),
        NftRule(chain="forward", expr=_expr({"vmap": {"key": _daddr(), "data": "@dispatch"}})),
        NftRule(chain="forward", expr=_expr({"jump": {"target": "sub"}})),
        NftRule(chain="sub", expr=_expr(_in_set(_saddr(), "local_cidrs"), ACCEPT)),
    ),
)


def _with(table: NftTable, **changes: Any) -> NftTable:
    fields = {"sets": table.sets, "maps": table.maps, "chains": table.chains, "rules": table.rules, **changes}
    return NftTable(family=table.family, name=table.name, **fields)


# ---- the two backends --------------------------------------------------------------------------------------


class Backend(Protocol):
    driver: FakeNft | NftDriver

    def install_foreign(self, table: NftTable) -> None: ...

    def listing(self, family: str, name: str) -> dict[str, Any] | None:
        """An independent summary of a table: chains, rules (chain, comment) in order, set elements."""
        ...


def _summary(chains: list[str], rules: list[tuple[str, str | None]], sets: dict[str, list[str]]) -> dict[str, Any]:
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
        return _summary(
            [c.name for c in t.chains],
            [(r.chain, r.comment) for r in t.rules],
            {s.name: list(s.elements) for s in t.sets} | {m.name: [f"{k}|{v}" for k, v in m.elements] for m in t.maps},
        )


def _cli_element(value: Any) -> str:
    """Element text from nft's own JSON, written independently of the driver's converter."""
    if isinstance(value, list):  # a map element: [key, value]
        return f"{_cli_element(value[0])}|{_cli_element(value[1])}"
    if isinstance(value, dict):
        (key, inner), *_ = value.items()
        if key == "prefix":
            return f"{inner['addr']}/{inner['len']}"
        if key == "range":
            return f"{inner[0]}-{inner[1]}"
        if key == "concat":
            return " . ".join(_cli_element(v) for v in inner)
        if key in ("jump", "goto"):
            return f"{key} {inner['target']}"
        return key
    return str(value)


class KernelBackend:
    def __init__(self, ns: str) -> None:
        self.ns = ns
        self.driver = NftDriver(ns)

    def _nft(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        cmd = ["ip", "netns", "exec", self.ns, "nft", *args]
        return subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=30, check=False)

    def install_foreign(self, table: NftTable) -> None:
        from magw.drivers.nft.codec import document, replace_commands

        done = self._nft("-j", "-f", "-", stdin=json.dumps(document(replace_commands(table))))
        assert done.returncode == 0, done.stderr

    def listing(self, family: str, name: str) -> dict[str, Any] | None:
        done = self._nft("-j", "list", "table", family, name)
        if done.returncode != 0:
            assert "No such file or directory" in done.stderr
            return None
        items = json.loads(done.stdout)["nftables"]
        chains = [i["chain"]["name"] for i in items if "chain" in i]
        rules = [(i["rule"]["chain"], i["rule"].get("comment")) for i in items if "rule" in i]
        sets = {
            i[k]["name"]: [_cli_element(e) for e in i[k].get("elem", [])]
            for i in items
            for k in ("set", "map")
            if k in i
        }
        return _summary(chains, rules, sets)


def _expected_listing(table: NftTable) -> dict[str, Any]:
    sets: dict[str, list[str]] = {s.name: list(s.elements) for s in table.sets}
    sets |= {m.name: [f"{k}|{v}" for k, v in m.elements] for m in table.maps}
    return _summary([c.name for c in table.chains], [(r.chain, r.comment) for r in table.rules], sets)


@pytest.fixture(params=["fake", pytest.param("kernel", marks=pytest.mark.kernel)])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    if request.param == "fake":
        yield FakeBackend()
        return
    with netns("magwt-nft") as ns:
        kernel = KernelBackend(ns)
        try:
            yield kernel
        finally:
            kernel.driver.close()


def _replace(table: NftTable) -> NftChange:
    return NftChange(family=table.family, name=table.name, table=table)


def _delete(family: str = "ip", name: str = "magw") -> NftChange:
    return NftChange(family=family, name=name, table=None)


def _apply_ok(backend: Backend, *changes: NftChange) -> None:
    result = backend.driver.apply(changes)
    assert [f.describe() for f in result.failed] == []
    assert result.applied == changes


def _apply_fails(backend: Backend, change: NftChange) -> ApplyResult:
    result = backend.driver.apply([change])
    assert (result.applied, [f.op for f in result.failed]) == ((), [change])
    return result


# ---- the cases ---------------------------------------------------------------------------------------------


def test_apply_then_observe_equals_the_table(backend: Backend) -> None:
    """A table applied on an empty node reads back equal, and nft itself lists the same objects."""
    _apply_ok(backend, _replace(T1))
    assert backend.driver.observe() == T1
    assert backend.listing("ip", "magw") == _expected_listing(T1)


def test_replace_swaps_rules_and_sets_in_one_go(backend: Backend) -> None:
    """Replacing the table leaves exactly the new rules and elements, nothing of the old table."""
    _apply_ok(backend, _replace(T1))
    _apply_ok(backend, _replace(T2))
    assert backend.driver.observe() == T2
    assert backend.listing("ip", "magw") == _expected_listing(T2)


def test_applying_the_same_table_twice_is_idempotent(backend: Backend) -> None:
    """Replace with an identical table succeeds and changes nothing."""
    _apply_ok(backend, _replace(T1), _replace(T1))
    assert backend.driver.observe() == T1


def test_delete_removes_our_table(backend: Backend) -> None:
    """table=None deletes the table."""
    _apply_ok(backend, _replace(T1))
    _apply_ok(backend, _delete())
    assert (backend.driver.observe(), backend.listing("ip", "magw")) == (None, None)


def test_delete_of_a_missing_table_succeeds(backend: Backend) -> None:
    """Deleting a table that does not exist is a success and creates nothing."""
    _apply_ok(backend, _delete())
    assert (backend.driver.observe(), backend.listing("ip", "magw")) == (None, None)


def test_dangling_set_reference_fails_and_keeps_the_old_table(backend: Backend) -> None:
    """A rule naming a missing set fails the whole transaction: the old table is intact."""
    _apply_ok(backend, _replace(T1))
    bad = NftRule(chain="forward", expr=_expr(_in_set(_saddr(), "missing"), ACCEPT))
    _apply_fails(backend, _replace(_with(T2, rules=(*T2.rules, bad))))
    assert backend.driver.observe() == T1
    assert backend.listing("ip", "magw") == _expected_listing(T1)


def test_dangling_jump_fails_and_keeps_the_old_table(backend: Backend) -> None:
    """A jump to a missing chain fails the whole transaction."""
    _apply_ok(backend, _replace(T1))
    _apply_fails(
        backend,
        _replace(_with(T2, rules=(*T2.rules, NftRule(chain="forward", expr=_expr({"jump": {"target": "nope"}}))))),
    )
    assert backend.driver.observe() == T1


def test_rule_in_a_missing_chain_fails(backend: Backend) -> None:
    """A rule whose chain is not in the table fails; nothing is created."""
    _apply_fails(backend, _replace(_with(T1, rules=(*T1.rules, NftRule(chain="nope", expr=_expr(ACCEPT))))))
    assert (backend.driver.observe(), backend.listing("ip", "magw")) == (None, None)


def test_jump_to_a_base_chain_fails(backend: Backend) -> None:
    """A jump into a base chain is refused (kernel: EOPNOTSUPP)."""
    _apply_fails(
        backend,
        _replace(
            _with(T1, rules=(*T1.rules, NftRule(chain="postrouting", expr=_expr({"jump": {"target": "forward"}}))))
        ),
    )
    assert backend.driver.observe() is None


def test_verdict_map_jump_to_a_missing_chain_fails(backend: Backend) -> None:
    """A verdict-map element that jumps to a missing chain fails the transaction."""
    vmap = NftMap(name="v", type="ipv4_addr", map="verdict", elements=(("10.0.0.1", "jump nope"),))
    _apply_fails(backend, _replace(_with(T1, maps=(vmap,))))
    assert backend.driver.observe() is None


@pytest.mark.parametrize(
    "chain",
    [
        NftChain(name="forward", type="nat", hook="forward", priority=0, policy="accept"),
        NftChain(name="forward", type="filter", hook="bogus", priority=0, policy="accept"),
        NftChain(name="forward", type="route", hook="input", priority=0, policy="accept"),
    ],
    ids=["nat-on-forward", "unknown-hook", "route-off-output"],
)
def test_base_chain_with_a_bad_hook_fails(backend: Backend, chain: NftChain) -> None:
    """A base chain on a hook its type or family does not have is refused; the old table stays."""
    _apply_ok(backend, _replace(T1))
    _apply_fails(backend, _replace(_with(T1, chains=(POST, chain))))
    assert backend.driver.observe() == T1


@pytest.mark.parametrize(
    "chain",
    [
        NftChain(name="forward", type="filter", priority=0, policy="accept"),
        NftChain(name="forward", type="filter", hook="forward", policy="accept"),
        NftChain(name="forward", type="filter", hook="forward", priority=0),
        NftChain(name="forward", policy="drop"),
    ],
    ids=["no-hook", "no-priority", "no-policy", "policy-on-regular"],
)
def test_incomplete_base_chain_is_refused(backend: Backend, chain: NftChain) -> None:
    """Half a base chain is refused (nft would quietly make a regular chain, or ignore/add a policy)."""
    result = _apply_fails(backend, _replace(_with(T1, chains=(POST, chain))))
    assert "chain forward" in result.failed[0].error
    assert backend.driver.observe() is None


def test_snat_in_a_filter_chain_fails(backend: Backend) -> None:
    """NAT statements are refused outside nat chains (kernel: EOPNOTSUPP)."""
    snat = NftRule(chain="forward", expr=_expr({"snat": {"addr": "10.1.1.1"}}))
    _apply_fails(backend, _replace(_with(T1, rules=(*T1.rules, snat))))
    assert backend.driver.observe() is None


def test_masquerade_in_a_regular_chain_reached_from_filter_fails(backend: Backend) -> None:
    """A regular chain is checked through the base chains that jump to it."""
    rules = (
        NftRule(chain="forward", expr=_expr({"jump": {"target": "sub"}})),
        NftRule(chain="sub", expr=_expr({"masquerade": None})),
    )
    _apply_fails(backend, _replace(_with(T1, chains=(POST, FWD, SUB), rules=rules)))
    assert backend.driver.observe() is None


@pytest.mark.parametrize(
    "bad",
    [
        NftSet(name="s", type="ipv4_addr", elements=("hello",)),
        NftSet(name="s", type="inet_service", elements=("10.0.0.1",)),
        NftSet(name="s", type="ipv4_addr", elements=("10.0.0.0/8",)),
        NftSet(name="s", type="ipv4_addr", flags=("interval",), elements=("10.0.0.0/8", "10.1.0.0/16")),
        NftSet(name="s", type="ipv4_addr", flags=("interval",), elements=("10.1.0.1/16",)),
        NftSet(name="s", type="bogus_type", elements=()),
        NftMap(name="s", type="ipv4_addr", map="ipv4_addr", elements=(("10.0.0.1", "80"),)),
        NftMap(name="s", type="ipv4_addr", map="verdict", elements=(("10.0.0.1", "maybe"),)),
    ],
    ids=[
        "hostname-as-address",
        "address-as-port",
        "prefix-without-interval",
        "overlapping-intervals",
        "non-canonical-prefix",
        "unknown-type",
        "map-value-type",
        "bad-verdict",
    ],
)
def test_bad_elements_fail_and_keep_the_old_table(backend: Backend, bad: NftSet | NftMap) -> None:
    """Elements of the wrong type, shape or form are refused; the old table stays."""
    _apply_ok(backend, _replace(T1))
    if isinstance(bad, NftMap):
        _apply_fails(backend, _replace(_with(T1, maps=(bad,))))
    else:
        _apply_fails(backend, _replace(_with(T1, sets=(*T1.sets, bad))))
    assert backend.driver.observe() == T1


def test_map_lookup_on_a_plain_set_is_refused(backend: Backend) -> None:
    """``snat to ip saddr map @a_set`` is refused before libnftables (nft 1.0.6 segfaults on it)."""
    rule = NftRule(
        chain="postrouting", expr=_expr({"snat": {"addr": {"map": {"key": _saddr(), "data": "@local_cidrs"}}}})
    )
    result = _apply_fails(backend, _replace(_with(T1, rules=(rule,))))
    assert "which is a set, not a map" in result.failed[0].error


def test_maps_and_sets_round_trip(backend: Backend) -> None:
    """Address maps, interval maps, verdict maps, concatenations, ports, marks, names, MACs: all read back."""
    _apply_ok(backend, _replace(MAPS))
    assert backend.driver.observe() == MAPS
    assert backend.listing("ip", "magw") == _expected_listing(MAPS)


def test_foreign_table_is_untouched(backend: Backend) -> None:
    """Replacing and deleting ours never changes another table, and a change for it is refused."""
    backend.install_foreign(CNI)
    before = backend.listing("ip", "cni")
    assert before == _expected_listing(CNI)
    _apply_ok(backend, _replace(T1), _replace(T2), _delete())
    result = _apply_fails(backend, _delete("ip", "cni"))
    assert result.failed[0].error == "refused: table ip cni is not one of ours"
    assert backend.listing("ip", "cni") == before


def test_a_failed_change_does_not_stop_the_next(backend: Backend) -> None:
    """Each change is its own transaction: a refused one is reported, the next still applies."""
    bad = _replace(_with(T1, rules=(NftRule(chain="nope", expr=_expr(ACCEPT)),)))
    result = backend.driver.apply([bad, _replace(T1)])
    assert (result.applied, [f.op for f in result.failed]) == ((_replace(T1),), [bad])
    assert backend.driver.observe() == T1


def test_change_with_a_mismatched_table_is_refused(backend: Backend) -> None:
    """An NftChange naming one table and carrying another is refused, nothing is written."""
    other = _with(T1)
    change = NftChange(family="ip", name="magw", table=NftTable(family="ip", name="other", chains=other.chains))
    _apply_fails(backend, change)
    assert (backend.listing("ip", "magw"), backend.listing("ip", "other")) == (None, None)


# ---- what nft 1.0.6 refuses while parsing or evaluating a rule (read back from NftDriver in a namespace)

_LOOP_CHAINS = (FWD, SUB, NftChain(name="sub2"))


@pytest.mark.parametrize(
    ("table", "cause"),
    [
        (
            _with(
                T1,
                sets=(NftSet(name="ports", type="inet_service", elements=("80",)),),
                rules=(NftRule(chain="forward", expr=_expr(_in_set(_saddr(), "ports"), ACCEPT)),),
            ),
            "datatype mismatch",
        ),
        (
            _with(
                T1,
                maps=(NftMap(name="v", type="inet_service", map="verdict", elements=(("80", "accept"),)),),
                rules=(NftRule(chain="forward", expr=_expr({"vmap": {"key": _daddr(), "data": "@v"}})),),
            ),
            "datatype mismatch",
        ),
        (
            _with(
                T1,
                sets=(NftSet(name="pairs", type="ipv4_addr . inet_service", elements=("10.0.0.1 . 80",)),),
                rules=(
                    NftRule(
                        chain="forward",
                        expr=_expr(_in_set({"concat": [_saddr(), {"meta": {"key": "mark"}}]}, "pairs"), ACCEPT),
                    ),
                ),
            ),
            "datatype mismatch",
        ),
        (
            _with(
                T1,
                chains=_LOOP_CHAINS,
                maps=(NftMap(name="back", type="ipv4_addr", map="verdict", elements=(("10.0.0.1", "jump sub"),)),),
                rules=(
                    NftRule(chain="forward", expr=_expr({"jump": {"target": "sub"}})),
                    NftRule(chain="sub", expr=_expr({"jump": {"target": "sub2"}})),
                    NftRule(chain="sub2", expr=_expr({"vmap": {"key": _daddr(), "data": "@back"}})),
                ),
            ),
            "Too many links",
        ),
        (
            _with(
                T1,
                chains=_LOOP_CHAINS,
                rules=(
                    NftRule(chain="forward", expr=_expr({"jump": {"target": "sub"}})),
                    NftRule(chain="sub", expr=_expr({"jump": {"target": "sub2"}})),
                    NftRule(chain="sub2", expr=_expr({"goto": {"target": "sub"}})),
                ),
            ),
            "Too many links",
        ),
        (
            _with(T1, rules=(NftRule(chain="forward", expr=_expr({"frobnicate": None})),)),
            "Unknown statement object 'frobnicate'",
        ),
        (
            _with(
                T1,
                rules=(
                    NftRule(
                        chain="forward",
                        expr=_expr({"match": {"op": "==", "left": {"meta": {"key": "bogus"}}, "right": 1}}, ACCEPT),
                    ),
                ),
            ),
            "syntax error, unexpected bogus, known keys are length, protocol",
        ),
    ],
    ids=[
        "set-datatype-mismatch",
        "vmap-datatype-mismatch",
        "concat-datatype-mismatch",
        "verdict-map-jump-loop",
        "jump-loop",
        "unknown-statement",
        "unknown-meta-key",
    ],
)
def test_what_nft_refuses_in_a_rule_fails_and_keeps_the_old_table(
    backend: Backend, table: NftTable, cause: str
) -> None:
    """A datatype mismatch, a jump loop reached from a base chain, an unknown statement and an unknown meta key
    are refused, naming the cause in nft's words; the old table stays."""
    _apply_ok(backend, _replace(T1))
    result = _apply_fails(backend, _replace(table))
    assert cause in result.failed[0].error
    assert backend.driver.observe() == T1


def test_a_jump_loop_no_base_chain_reaches_is_accepted(backend: Backend) -> None:
    """The kernel checks loops from the base chains only: two regular chains jumping at each other, reached
    from nowhere, are accepted."""
    table = _with(
        T1,
        chains=(POST, FWD, SUB, NftChain(name="sub2")),
        rules=(
            NftRule(chain="sub", expr=_expr({"jump": {"target": "sub2"}})),
            NftRule(chain="sub2", expr=_expr({"jump": {"target": "sub"}})),
        ),
    )
    _apply_ok(backend, _replace(table))
    assert backend.driver.observe() == table
