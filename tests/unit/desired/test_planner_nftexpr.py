"""The nft expression builder and printer against nft's own JSON (tests/data/nft_canonical_example.json).

The example file was made by loading tests/data/nft_canonical_example.nft with
nft 1.0.6 and listing it with ``nft -j``: the builder must produce the same
expression lists, as canonical strings.
"""

from __future__ import annotations

import json

import pytest

from magw.desired.nft import expr as x
from magw.desired.nft.text import expr_text, table_text
from magw.desired.nft.values import NftChain, NftRule, NftSet, NftTable
from magw.desired.node.planner import plan
from tests.support.paths import DATA
from tests.support.planner_seed import seed_east


def _example_rules() -> dict[str, str]:
    """Canonical expr strings of the example, keyed by chain and position (``forward.0``)."""
    objects = json.loads((DATA / "nft_canonical_example.json").read_text())["nftables"]
    rules = [o["rule"] for o in objects if "rule" in o]
    out: dict[str, str] = {}
    for chain in dict.fromkeys(r["chain"] for r in rules):
        for i, r in enumerate(r for r in rules if r["chain"] == chain):
            out[f"{chain}.{i}"] = json.dumps(r["expr"], sort_keys=True)
    return out


EXAMPLE = _example_rules()

BUILT = {
    "postrouting.0": [
        x.match(x.ip_saddr(), x.set_ref("local_cidrs")),
        x.match(x.ip_daddr(), x.set_ref("remote_cidrs")),
        x.snat(x.ip_saddr()),
    ],
    "postrouting.1": [
        x.match(x.ip_saddr(), x.set_ref("remote_cidrs")),
        x.flags_in(x.ct("status"), "dnat"),
        x.oifname("vxlan-tunnel", negate=True),
        x.snat("10.1.1.1"),
    ],
    "forward.0": [x.iifname("vxlan-tunnel"), x.match(x.ip_daddr(), x.set_ref("local_cidrs")), x.accept()],
    "forward.1": [x.oifname("vxlan-tunnel"), x.accept()],
    "forward.2": [
        x.tcp_flags("syn", ("syn", "rst")),
        x.match(x.ip_daddr(), x.set_ref("remote_cidrs")),
        x.mss_clamp_to_pmtu(),
    ],
    "input.0": [x.udp_dport(4800), x.match(x.ip_saddr(), x.set_ref("cluster_nodes"), "!="), x.drop()],
    "input.1": [x.udp_dport(4500), x.iifname("vxlan-tunnel"), x.drop()],
    "input.2": [x.udp_dport(4500), x.match(x.ip_saddr(), x.set_ref("vxlan_peers"), "!="), x.drop()],
    "input.3": [x.udp_dport((4800, 4500)), x.accept()],
}

TEXT = {
    "postrouting.0": "ip saddr @local_cidrs ip daddr @remote_cidrs snat to ip saddr",
    "postrouting.1": 'ip saddr @remote_cidrs ct status dnat oifname != "vxlan-tunnel" snat to 10.1.1.1',
    "forward.0": 'iifname "vxlan-tunnel" ip daddr @local_cidrs accept',
    "forward.1": 'oifname "vxlan-tunnel" accept',
    "forward.2": "tcp flags syn / syn,rst ip daddr @remote_cidrs tcp option maxseg size set rt mtu",
    "input.0": "udp dport 4800 ip saddr != @cluster_nodes drop",
    "input.1": 'udp dport 4500 iifname "vxlan-tunnel" drop',
    "input.2": "udp dport 4500 ip saddr != @vxlan_peers drop",
    "input.3": "udp dport { 4500, 4800 } accept",
}


def test_example_covers_every_built_rule() -> None:
    """The builder cases match the example file's rules one to one."""
    assert sorted(BUILT) == sorted(EXAMPLE)


@pytest.mark.parametrize("key", sorted(BUILT))
def test_builder_matches_nft_json(key: str) -> None:
    """Each built rule's canonical string equals what nft 1.0.6 lists for the same rule."""
    assert x.canonical(BUILT[key]) == EXAMPLE[key]


@pytest.mark.parametrize("key", sorted(TEXT))
def test_printer_gives_nft_text(key: str) -> None:
    """The printer turns nft's own JSON back into nft's text form."""
    assert expr_text(EXAMPLE[key]) == TEXT[key]


def test_planned_rules_use_the_example_shapes() -> None:
    """The planner's gateway rules are exactly the example's rules (same expr strings), plus the reverse clamp and
    the guard against a Service's orphan replies (one per Service CIDR of the cluster)."""
    table = plan(seed_east(), "e-gw1").nft
    assert table is not None
    planned = {r.expr for r in table.rules}
    assert set(EXAMPLE.values()) <= planned
    assert sorted(expr_text(e) for e in planned - set(EXAMPLE.values())) == [
        'iifname "vx-submariner" ip saddr 100.1.0.0/16 ct state new drop',
        "tcp flags syn / syn,rst ip saddr @remote_cidrs tcp option maxseg size set rt mtu",
    ]


def test_only_gateways_drop_a_services_orphan_replies() -> None:
    """A worker forwards what its pods' Services answer; the guard is a gateway's (magw.desired.nft.plan)."""
    for node, want in (("e-gw1", 1), ("e-w1", 0)):
        table = plan(seed_east(), node).nft
        assert table is not None
        assert sum('iifname "vx-submariner" ip saddr 100.1.0.0/16' in expr_text(r.expr) for r in table.rules) == want


def test_rule_text_adds_the_comment_quoted() -> None:
    """rule_text appends the comment as nft does: comment "..."."""
    rule = x.rule("postrouting", x.match(x.ip_saddr(), x.set_ref("a")), x.masquerade(), comment='magw: say "hi"')
    assert x.rule_text(rule) == 'ip saddr @a masquerade comment "magw: say \\"hi\\""'


def test_more_shapes_print_as_nft_does() -> None:
    """Prefixes, ranges, ports, flags lists, marks, jumps, counters and verdicts print in nft syntax."""
    cases = [
        ([x.match(x.ip_saddr(), x.prefix("10.0.0.0/8")), x.masquerade()], "ip saddr 10.0.0.0/8 masquerade"),
        ([x.match(x.ip_daddr(), x.prefix("10.1.1.1/32")), x.drop()], "ip daddr 10.1.1.1 drop"),
        ([x.match(x.payload("tcp", "dport"), 81), x.snat("10.2.2.2", 80)], "tcp dport 81 snat to 10.2.2.2:80"),
        ([x.snat(x.addr_range("10.4.4.4", "10.4.4.8"))], "snat to 10.4.4.4-10.4.4.8"),
        ([x.match(x.ip_daddr(), "10.1.1.1"), x.dnat("10.3.3.3")], "ip daddr 10.1.1.1 dnat to 10.3.3.3"),
        ([x.flags_in(x.ct("state"), "established", "related"), x.accept()], "ct state established,related accept"),
        ([x.flags_in(x.ct("status"), "dnat", negate=True), x.return_()], "ct status != dnat return"),
        ([x.match(x.meta("mark"), 1), x.counter(), x.jump("c1")], "meta mark 1 counter jump c1"),
        ([x.match(x.bitand(x.meta("mark"), 786432), 786432), x.goto("c1")], "meta mark & 786432 == 786432 goto c1"),
        ([x.match(x.meta("iif"), "lo"), x.drop()], 'iif "lo" drop'),
        ([x.mangle(x.meta("mark"), 786432)], "meta mark set 786432"),
        (
            [x.match(x.ip_daddr(), x.anon_set(["10.0.0.1", "10.0.0.2"])), x.accept()],
            "ip daddr { 10.0.0.1, 10.0.0.2 } accept",
        ),
        ([x.match(x.ip_saddr(), x.set_ref("s"), "!="), x.accept()], "ip saddr != @s accept"),
    ]
    assert [expr_text(x.canonical(exprs)) for exprs, _ in cases] == [text for _, text in cases]


def test_builder_rejects_bad_input_with_a_clear_line() -> None:
    """Bad builder input is a ValueError naming the argument and the reason."""
    with pytest.raises(ValueError, match=r"^match: op '=~' is not one of"):
        x.match(x.ip_saddr(), "10.0.0.1", "=~")
    with pytest.raises(ValueError, match=r"^anon_set: values must not be empty"):
        x.anon_set([])
    with pytest.raises(ValueError, match=r"^set_ref: name '@x' must be a bare"):
        x.set_ref("@x")
    with pytest.raises(ValueError, match=r"^rule: comment .* longer than nft's 128 bytes$"):
        x.rule("c", x.accept(), comment="x" * 129)
    with pytest.raises(ValueError, match=r"^nft expr: unsupported statement 'queue'$"):
        expr_text(json.dumps([{"queue": {"num": 1}}]))


def test_table_text_lays_out_sets_chains_and_rules() -> None:
    """table_text prints sets, then chains with their base-chain line and rules in order."""
    table = NftTable(
        family="ip",
        name="t",
        sets=[NftSet(name="s", type="ipv4_addr", flags=("interval",), elements=("10.0.0.0/8", "10.9.9.9"))],
        chains=[
            NftChain(name="post", type="nat", hook="postrouting", priority=90, policy="accept"),
            NftChain(name="c"),
        ],
        rules=(
            NftRule(chain="post", expr=x.canonical([x.match(x.ip_saddr(), x.set_ref("s")), x.masquerade()])),
            NftRule(chain="post", expr=x.canonical([x.accept()]), comment="magw: last"),
        ),
    )
    assert table_text(table) == (
        "table ip t {\n"
        "  set s {\n"
        "    type ipv4_addr\n"
        "    flags interval\n"
        "    elements = { 10.0.0.0/8, 10.9.9.9 }\n"
        "  }\n"
        "  chain c {\n"
        "  }\n"
        "  chain post {\n"
        "    type nat hook postrouting priority 90; policy accept;\n"
        "    ip saddr @s masquerade\n"
        '    accept comment "magw: last"\n'
        "  }\n"
        "}\n"
    )
