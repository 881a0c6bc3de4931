"""keepalived.conf for one node's egress VIPs: pure rendering, deterministic, no I/O (docs/egress-ha.md).

One ``vrrp_instance`` per VIP the node is a candidate of; the instance is named after the VIP, so a FIFO
line ``INSTANCE "<name>" MASTER`` maps back to the ``EgressVIP`` without a table. Choices, each argued in
docs/egress-ha.md:

- VRRPv3 (``vrrp_version 3``): advert_int below one second (centiseconds on the wire).
- Unicast to the other candidates' underlay IPs: cloud underlays rarely carry multicast, and a VIP's
  adverts then reach only its candidates. A candidate without a known underlay IP is left out (a comment
  says so) instead of failing every node's config.
- Priorities 250, 230, 210, ... in candidate order (step 20, smaller only past 13 candidates). VRRPv3's
  master-down interval is ``3 * advert_int + (256 - priority) * advert_int / 256``: a high priority keeps
  a backup's skew (and so the loss window) small, about 10 ms at advert_int 0.1 for the second candidate,
  while a step of 20 still separates two backups' timers by ~8 ms, so the preferred survivor wins instead
  of two backups racing (a race is an extra VIP move and extra GARPs).
- ``nopreempt``: a returning preferred node does not take the VIP back. Taking it back is a second move
  with its own loss window and conntrack commit for nothing gained. All instances start ``BACKUP`` (which
  ``nopreempt`` requires); the election still prefers the higher priority when nodes start together.
- GARP: a burst of ``garp_master_repeat`` on becoming master, a second burst ``garp_master_delay`` later
  for anyone who missed the first, and a refresh every ``garp_master_refresh`` seconds. The GARP is what
  moves the steered traffic (design: tunnels point at the VIP).
- The underlay interface is the instance's own interface, which keepalived always tracks (a
  ``track_interface`` on it is ignored by keepalived 2.2.7, so none is written).
- The agent check: ``flock -n -E 0 LOCK /bin/false`` fails exactly when nobody holds the lock, i.e. when
  the agent (which holds it while it lives) is dead; the instance then goes FAULT and gives the VIP up.
  The kernel drops the lock with the process, so there is no PID to be reused and no heartbeat to miss.
- Events reach the agent through ``vrrp_notify_fifo`` (no notify scripts to install).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from ipaddress import IPv4Address

import attrs

from magw.model.egressgw import MAX_ADVERT_INT, MIN_ADVERT_INT, EgressConfig, EgressVIP

TOP_PRIORITY = 250  # 255 means "address owner" (RFC 5798); we never own the VIP
BOTTOM_PRIORITY = 1
PRIORITY_STEP = 20
GARP_MASTER_DELAY = 1  # seconds: the second GARP burst after becoming master
GARP_MASTER_REPEAT = 3  # GARPs per burst
GARP_MASTER_REFRESH = 60  # seconds between refresh GARPs while master
FLOCK = "/usr/bin/flock"
FALSE = "/bin/false"
# keepalived splits a script line on blanks and reads the file's own quoting: keep paths plain.
_PLAIN_PATH = re.compile(r"^/[A-Za-z0-9._/+@:-]*$")
_PLAIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class KeepalivedConfigError(ValueError):
    """The inputs cannot give a valid keepalived.conf (one line: which value and why)."""


@attrs.frozen(kw_only=True)
class AgentCheck:
    """The ``vrrp_script`` that makes a node whose agent is dead give its VIPs up.

    ``lock_file`` is held (flock) by the agent while it lives. ``interval`` whole seconds between runs
    (keepalived 2.2.7 refuses fractions and anything below 1); ``fall`` failures in a row make the instances
    FAULT, ``rise`` successes bring them back.
    """

    lock_file: str
    interval: int = 1
    fall: int = 2
    rise: int = 1


@attrs.frozen(kw_only=True)
class KeepalivedNode:
    """The node the config is for: its name, underlay interface and IP, the FIFO path, the check."""

    name: str
    interface: str
    ip: IPv4Address
    fifo: str
    check: AgentCheck | None = None


def priorities(count: int) -> tuple[int, ...]:
    """Priorities for ``count`` candidates in order: 250 down by 20, or by less when 250..1 must fit more."""
    if count < 1:
        return ()
    if count > TOP_PRIORITY - BOTTOM_PRIORITY + 1:
        raise KeepalivedConfigError(f"{count} candidates: VRRP priorities allow at most {TOP_PRIORITY}")
    if count == 1:
        return (TOP_PRIORITY,)
    step = min(PRIORITY_STEP, (TOP_PRIORITY - BOTTOM_PRIORITY) // (count - 1))
    return tuple(TOP_PRIORITY - i * step for i in range(count))


def _seconds(value: float) -> str:
    """keepalived reads decimal seconds; centiseconds are VRRPv3's resolution."""
    text = f"{round(value, 2):.2f}".rstrip("0").rstrip(".")
    return text or "0"


def _plain(kind: str, value: str, pattern: re.Pattern[str]) -> str:
    if not pattern.match(value):
        raise KeepalivedConfigError(f"{kind} {value!r} must match {pattern.pattern} (keepalived splits on blanks)")
    return value


def _global_defs(node: KeepalivedNode) -> list[str]:
    lines = [
        "global_defs {",
        f"  router_id {_plain('node name', node.name, _PLAIN_NAME)}",
        "  vrrp_version 3",
        # script_user before anything that runs or opens a script-like object: on a reload keepalived
        # parses in order and a FIFO line before it fails for want of the default user 'keepalived_script'.
        "  script_user root",
        "  enable_script_security",
        f"  vrrp_notify_fifo {_plain('FIFO path', node.fifo, _PLAIN_PATH)}",
        "}",
    ]
    if node.check is not None:
        c = node.check
        lock = _plain("lock file", c.lock_file, _PLAIN_PATH)
        if c.interval < 1 or c.fall < 1 or c.rise < 1:
            raise KeepalivedConfigError(f"agent check interval/fall/rise must be >= 1: {c}")
        lines += [
            "",
            "vrrp_script magw_agent {",
            f'  script "{FLOCK} -n -E 0 {lock} {FALSE}"',
            f"  interval {c.interval}",
            f"  timeout {c.interval}",
            f"  fall {c.fall}",
            f"  rise {c.rise}",
            "}",
        ]
    return lines


def _instance(
    node: KeepalivedNode, vip: EgressVIP, node_ips: Mapping[str, IPv4Address], advert_int: float
) -> list[str]:
    prio = priorities(len(vip.candidates))[vip.candidates.index(node.name)]
    peers = [c for c in vip.candidates if c != node.name]
    known = [c for c in peers if c in node_ips]
    unknown = [c for c in peers if c not in node_ips]
    lines = [
        "",
        f"vrrp_instance {_plain('VIP name', vip.name, _PLAIN_NAME)} {{",
        "  state BACKUP",
        f"  interface {_plain('interface', node.interface, _PLAIN_NAME)}",
        f"  virtual_router_id {vip.vrid}",
        f"  priority {prio}",
        f"  advert_int {_seconds(advert_int)}",
        "  nopreempt",
        f"  unicast_src_ip {node.ip}",
        "  unicast_peer {",
        *(f"    {node_ips[c]}" for c in sorted(known, key=lambda c: node_ips[c])),
        "  }",
    ]
    # Only adverts from the listed peers count: anyone else on the underlay (a pod's packet routed there) could
    # otherwise send priority 255 and take the VIP. Not while a candidate's IP is unknown: its adverts would be
    # dropped and both would hold the VIP.
    lines += ["  check_unicast_src"] if not unknown else []
    lines += [f"  # candidate {c}: no underlay IP known, left out" for c in unknown]
    lines += [
        "  virtual_ipaddress {",
        f"    {vip.vip}/32 dev {node.interface}",
        "  }",
        f"  garp_master_delay {GARP_MASTER_DELAY}",
        f"  garp_master_repeat {GARP_MASTER_REPEAT}",
        f"  garp_master_refresh {GARP_MASTER_REFRESH}",
        "  garp_master_refresh_repeat 1",
    ]
    if node.check is not None:
        lines += ["  track_script {", "    magw_agent", "  }"]
    lines.append("}")
    return lines


def render(
    node: KeepalivedNode,
    vips: Iterable[EgressVIP],
    node_ips: Mapping[str, IPv4Address],
    config: EgressConfig,
) -> str:
    """keepalived.conf for ``node``: one instance per VIP it is a candidate of, sorted by VIP name.

    ``node_ips`` maps node names to underlay IPs (the unicast peers). The same inputs give the same text.
    """
    if not MIN_ADVERT_INT <= config.advert_int <= MAX_ADVERT_INT:
        raise KeepalivedConfigError(f"advert_int {config.advert_int} outside {MIN_ADVERT_INT}..{MAX_ADVERT_INT}")
    mine = sorted((v for v in vips if node.name in v.candidates), key=lambda v: v.name)
    vrids: dict[int, str] = {}
    for v in mine:
        if v.vrid in vrids:
            raise KeepalivedConfigError(f"VIPs {vrids[v.vrid]} and {v.name} share virtual_router_id {v.vrid}")
        vrids[v.vrid] = v.name
    lines = ["# generated by magw (docs/egress-ha.md); do not edit", *_global_defs(node)]
    for v in mine:
        lines += _instance(node, v, node_ips, config.advert_int)
    return "\n".join(lines) + "\n"
