"""Kernel test: ``magw verify`` on an OVN lab (``--cni ovn``, docs/verify.md): the reachability probes as on a plain
lab, and instead of the nft traces (the pods' packets cross each node's Open vSwitch, which the nodes' kernels do
not see) ``magw lab verify``'s checks, each in the report and the JSON. One small lab, always removed."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from magw.lab.build import lifecycle as build
from magw.lab.planes.daemons import daemons_installed
from magw.lab.planes.ovn_servers import ovn_missing
from magw.lab.spec.topology import parse_topology
from tests.support.cli import MagwCli
from tests.support.labkit import unique_name

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.ovn,
    pytest.mark.skipif(not daemons_installed(), reason="the magw daemons are not installed (pip install -e .)"),
]

TOPOLOGY = {
    "clusters": [
        {"id": "east", "gateways": 2, "workers": 1, "pods_per_node": 1},
        {"id": "west", "gateways": 1, "workers": 1, "pods_per_node": 1},
    ]
}


@pytest.fixture(scope="module")
def lab_name() -> Iterator[str]:
    reason = ovn_missing()
    if reason:
        pytest.skip(reason)
    name = unique_name()
    try:
        build.up(parse_topology(TOPOLOGY), name=name, daemons=True, wait_timeout=90.0, cni="ovn")
        yield name
    finally:
        build.down(name)


def test_verify_on_ovn_runs_the_ovn_checks(lab_name: str, magw_cli: MagwCli) -> None:
    done = magw_cli("verify", "--lab", lab_name, "--json", stdin="", timeout=300)
    assert done.returncode == 0, done.stderr + done.stdout[-2000:]
    doc = json.loads(done.stdout)
    assert doc["ok"] and doc["gateways"] == []
    assert doc["checks"] and all(c["ok"] for c in doc["checks"])
    ovn = doc["ovn_checks"]
    assert {c["how"] for c in ovn} == {"trace", "state", "packet"}
    assert {c["what"] for c in ovn} >= {"egress", "ecmp", "ingress", "node", "pods"}
    assert all(c["ok"] for c in ovn)
    text = magw_cli("verify", "--lab", lab_name, stdin="", timeout=300).stdout
    assert "OVN checks (magw lab verify):" in text and text.rstrip().splitlines()[-1].startswith("OK: ")
