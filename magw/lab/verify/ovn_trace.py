"""``ovn-trace`` on an SB database (no datapath needed), and the facts read from its text.

Shared by the OVN tests (``tests/support/ovn_fixture.py`` re-exports it) and ``magw lab verify``: both assert on
what the real northd compiled, as ``ovn-trace --detailed`` prints it, and on the SB's port bindings, never on
magw's own NB rows.
"""

from __future__ import annotations

import re
import subprocess

import attrs

from magw.lab.planes.ovn_topology import CMD_TIMEOUT, Databases, sbctl, tool_env


@attrs.frozen
class Trace:
    """What ``ovn-trace --detailed`` printed, and the facts tests assert on, parsed from that text only."""

    text: str

    @property
    def datapaths(self) -> list[str]:
        """Every logical datapath the packet entered, in order (``ingress(dp="X", ...)``)."""
        return re.findall(r'^\s*ingress\(dp="([^"]+)"', self.text, re.M)

    @property
    def outputs(self) -> list[tuple[str, str]]:
        """Every ``/* output to "PORT", type "TYPE" */``: (port, type)."""
        return re.findall(r'/\* output to "([^"]+)", type "([^"]*)" \*/', self.text)

    @property
    def next_hops(self) -> list[str]:
        """Every routing decision's next hop (``reg0 = A.B.C.D`` set by lr_in_ip_routing)."""
        return re.findall(r"\breg0 = (\d+\.\d+\.\d+\.\d+);", self.text)

    @property
    def last_output(self) -> tuple[str, str] | None:
        outs = self.outputs
        return outs[-1] if outs else None

    @property
    def buckets(self) -> int:
        """How many ECMP buckets the first ``select(1=W, 2=W, ...)`` offered (1 without a select)."""
        m = re.search(r"select\(([^)]*)\)", self.text)
        return 1 if m is None else len(m.group(1).split(","))


def microflow(inport: str, eth_src: str, eth_dst: str, src: str, dst: str, sport: int = 40000, dport: int = 80) -> str:
    return (
        f'inport == "{inport}" && eth.src == {eth_src} && eth.dst == {eth_dst} && ip4.src == {src} && '
        f"ip4.dst == {dst} && ip.ttl == 64 && tcp && tcp.src == {sport} && tcp.dst == {dport}"
    )


def ovn_trace(dbs: Databases, datapath: str, flow: str, select_id: int | None = None, ct: str = "new,trk") -> Trace:
    """``ovn-trace --detailed`` on the SB database (no datapath needed). ``select_id`` fixes the ECMP bucket
    that ``select()`` takes, as a datapath's flow hash would; ``ct`` is the conntrack state every ``ct_*``
    action returns (a new connection by default, so load balancers pick a backend)."""
    args = ["ovn-trace", f"--db={dbs.sb}", "--detailed", f"--ct={ct}"]
    if select_id is not None:
        args.append(f"--select-id={select_id}")
    out = subprocess.run(
        [*args, datapath, flow], check=True, capture_output=True, text=True, env=tool_env(dbs.dir), timeout=CMD_TIMEOUT
    )
    return Trace(out.stdout)


def l3gateway_chassis(dbs: Databases, port: str) -> str | None:
    """The chassis northd bound an l3gateway port to (SB ``Port_Binding.options:l3gateway-chassis``), None when
    the port is not an l3gateway port (or not in the SB)."""
    out = sbctl(dbs, "--bare", "--columns=options", "find", "Port_Binding", f"logical_port={port}")
    m = re.search(r"l3gateway-chassis=([^\s,]+)", out)
    return None if m is None else m.group(1).strip('"')
