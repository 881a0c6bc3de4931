"""Structure-aware fuzzing of the Kubernetes fields of docs/client-ip.md: a Node's ``spec.podCIDRs`` and
``spec.podCIDR``, the ConfigMap's ``keepClientIP``, each holding any JSON value (and CIDR-like strings). Every
example must satisfy the targets' rule (tests/fuzz/targets.py): map and assemble, or one line naming the object."""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from magw.sources.kube import mapping
from tests.fuzz import targets

EXAMPLES = int(os.environ.get("MAGW_FUZZ_EXAMPLES", "60"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])

CIDRISH = st.sampled_from(
    ["10.1.3.0/24", "10.1.3.7/24", "fd00:10:244::/64", "10.1.3.0", "10.1.3.0/33", "0.0.0.0/0", "10.1.3.0/24\n", ""]
) | st.text(max_size=20)
SCALARS = st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(allow_nan=True) | CIDRISH
JSON = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=2)
)


def node(spec: Any) -> dict[str, Any]:
    annotations = {mapping.CNI_IP_ANNOTATION: "10.1.3.1"}
    status = {"addresses": [{"type": "InternalIP", "address": "172.18.0.3"}]}
    return {"kind": "Node", "metadata": {"name": "e-w1", "annotations": annotations}, "spec": spec, "status": status}


@SETTINGS
@given(st.dictionaries(st.sampled_from(["podCIDRs", "podCIDR"]), JSON | st.lists(CIDRISH, max_size=3)) | JSON)
def test_a_nodes_pod_cidrs_map_or_fail_in_one_line(spec: Any) -> None:
    targets.map_object(node(spec))


@SETTINGS
@given(JSON)
def test_keep_client_ip_maps_or_fails_in_one_line(value: Any) -> None:
    targets.map_object({"kind": "ConfigMap", "metadata": {"name": "magw-config"}, "data": {"keepClientIP": value}})
