"""A large snapshot for the scale benchmarks: N remote CIDRs spread over R remote clusters.

Usage: .venv/bin/python benchmarks/bigsnap.py --cidrs 100000 [--remotes 100] > big.yaml

The local cluster ``c0`` has two gateway nodes (``gw1``, ``gw2``) and one worker
(``w1``); each remote cluster ``c1..cR`` has two gateways. The remote CIDRs are
consecutive /24s from 11.0.0.0 (one service CIDR per cluster, the rest pod CIDRs), so a
gateway's plan holds exactly N routes. The text is written directly (no YAML dumper):
a 100k-CIDR file takes well under a second to produce.
"""

from __future__ import annotations

import argparse
import sys
from ipaddress import IPv4Address

LOCAL_CNI_IP = "10.0.0.1"
FIRST_REMOTE = int(IPv4Address("11.0.0.0"))
MAX_CIDRS = 1_000_000


def _net24(index: int) -> str:
    return f"{IPv4Address(FIRST_REMOTE + (index << 8))}/24"


def per_cluster(cidrs: int, remotes: int) -> list[int]:
    """How many CIDRs each remote cluster gets: ``cidrs`` split as evenly as possible, at least 1 each."""
    base, extra = divmod(cidrs, remotes)
    return [base + (1 if r < extra else 0) for r in range(remotes)]


def snapshot_text(cidrs: int, remotes: int = 100) -> str:
    """The YAML text of the snapshot (see the module docstring)."""
    if not remotes <= cidrs <= MAX_CIDRS:
        raise ValueError(f"cidrs must be {remotes}..{MAX_CIDRS} (one per remote cluster at least), got {cidrs}")
    out = [
        "local_cluster: c0\n",
        "clusters:\n",
        "- id: c0\n  pod_cidrs: [10.0.0.0/16]\n  service_cidrs: [10.96.0.0/16]\n",
    ]
    endpoints = [
        "- {cluster: c0, hostname: gw1, private_ip: 172.16.0.2}\n",
        "- {cluster: c0, hostname: gw2, private_ip: 172.16.0.3}\n",
    ]
    index = 0
    for r, count in enumerate(per_cluster(cidrs, remotes), start=1):
        nets = [_net24(index + k) for k in range(count)]
        index += count
        out.append(f"- id: c{r}\n  service_cidrs: [{nets[0]}]\n  pod_cidrs:\n")
        out.extend(f"  - {n}\n" for n in nets[1:])
        if count == 1:
            out[-1] = out[-1].replace("  pod_cidrs:\n", "  pod_cidrs: []\n")
        for g in range(2):
            endpoints.append(f"- {{cluster: c{r}, hostname: c{r}-gw{g}, private_ip: 172.31.{r}.{g + 2}}}\n")
    out += [
        "nodes:\n",
        f"- {{name: gw1, ip: 172.16.0.2, cni_ip: {LOCAL_CNI_IP}, gateway: true}}\n",
        "- {name: gw2, ip: 172.16.0.3, cni_ip: 10.0.1.1, gateway: true}\n",
        "- {name: w1, ip: 172.16.0.4, cni_ip: 10.0.2.1}\n",
        "endpoints:\n",
        *endpoints,
    ]
    return "".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cidrs", type=int, required=True, help="remote CIDRs in all (= routes of a gateway)")
    parser.add_argument("--remotes", type=int, default=100, help="remote clusters (default 100)")
    args = parser.parse_args()
    sys.stdout.write(snapshot_text(args.cidrs, args.remotes))


if __name__ == "__main__":
    main()
