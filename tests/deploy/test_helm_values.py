"""values.schema.json: bad values fail ``helm template`` and ``helm lint`` with an error naming the value, before
anything renders; and docs/helm.md describes every value of values.yaml."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.support.helm_tool import CHART, Helm
from tests.support.paths import REPO

BAD = [
    ({"cable": "ipsec"}, "/cable", "value must be one of 'vxlan', 'wireguard'"),
    ({"cni": "calico"}, "/cni", "value must be one of 'generic', 'ovn'"),
    ({"strategy": "random"}, "/strategy", "value must be one of"),
    ({"underlayMTU": 100}, "/underlayMTU", "minimum"),
    ({"underlayMTU": "1500"}, "/underlayMTU", "got string, want integer"),
    ({"wireguardPort": 70000}, "/wireguardPort", "maximum"),
    ({"clusterID": "Cluster_A"}, "/clusterID", "does not match pattern"),
    ({"namespace": ""}, "/namespace", "does not match pattern"),
    ({"globalnet": {"enabled": True, "globalCIDR": ["242.0.0.0/33"]}}, "/globalnet/globalCIDR/0", "pattern"),
    ({"globalnet": {"enabled": "yes"}}, "/globalnet/enabled", "got string, want boolean"),
    (
        {"egress": {"enabled": True, "tls": {"secretName": "Bad Name", "caConfigMap": "ca"}}},
        "/egress/tls/secretName",
        "pattern",
    ),
    (
        {"egress": {"enabled": True, "networkPolicy": {"nodeCIDR": "10.0.0.0"}}},
        "/egress/networkPolicy/nodeCIDR",
        "pattern",
    ),
    ({"egress": {"enabled": True, "interface": "eth0/1"}}, "/egress/interface", "pattern"),
    ({"egress": {"enabeld": True}}, "/egress", "additional properties 'enabeld' not allowed"),
    ({"cluster": {"create": True}}, "/cluster/clusterCIDR", "minItems"),
    (
        {"gateway": {"nodeSelector": {"submariner.io/gateway": True}}},
        "/gateway/nodeSelector/submariner.io~1gateway",
        "got boolean, want string",
    ),
    ({"replicas": 2}, "", "additional properties 'replicas' not allowed"),
]


@pytest.mark.parametrize(("values", "where", "message"), BAD, ids=[repr(b[0]) for b in BAD])
def test_bad_values_fail_template_naming_the_value(
    helm: Helm, values: dict[str, Any], where: str, message: str
) -> None:
    done = helm.run("template", "magw", CHART, values=values)
    assert done.returncode != 0 and done.stdout == ""
    assert "values don't meet the specifications of the schema" in done.stderr
    line = next(ln for ln in done.stderr.splitlines() if ln.startswith(f"- at '{where}'"))
    assert message in line, done.stderr


def test_bad_values_fail_lint(helm: Helm) -> None:
    done = helm.run("lint", CHART, values={"cable": "ipsec"})
    assert done.returncode != 0
    assert "1 chart(s) linted, 1 chart(s) failed" in done.stdout + done.stderr


def _leaves(node: Any, prefix: str = "") -> Iterator[str]:
    if isinstance(node, dict) and node:
        for key, sub in node.items():
            yield from _leaves(sub, f"{prefix}.{key}" if prefix else key)
    else:
        yield prefix


def test_docs_describe_every_value() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    doc = (REPO / "docs" / "helm.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| `([\w.]+)` \|", doc, re.M))
    assert sorted(_leaves(values)) == sorted(documented)
