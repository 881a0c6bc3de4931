"""Structure-aware fuzzing with hypothesis: documents and Kubernetes objects built from the fields the parsers
know, each holding any JSON value, so the search reaches the field checks instead of stopping at the YAML or
JSON syntax (atheris, benchmarks/fuzz.py, mutates bytes). Every example must satisfy the targets' rule:
return, or the documented error as one line naming the input (tests/fuzz/targets.py)."""

from __future__ import annotations

import os
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz import targets

EXAMPLES = int(os.environ.get("MAGW_FUZZ_EXAMPLES", "60"))  # per test; more for a longer search
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True),
    st.text(max_size=12),
    st.sampled_from(["10.1.0.0/16", "192.0.2.1", "09.1.3.21", "242.1.0.0/16", "None", "TCP", "true", "0x10", ""]),
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)

# The fields magw's mapping reads (magw/sources/kube/mapping.py), in spec, status, data or at the top.
SPEC_KEYS = [
    "cluster_id", "cluster_cidr", "service_cidr", "global_cidr", "hostname", "private_ip", "public_ip", "subnets",
    "allocated_ips", "backend", "backend_config", "multiActiveGatewayEnabled", "networkPlugin", "nodeName",
    "hostNetwork", "clusterIP", "selector", "ports", "publishNotReadyAddresses", "numberOfIPs", "podSelector",
    "target", "objRef", "serviceName", "targetIP", "vip", "vrid", "candidates", "bindings", "vipRanges",
    "advertInt", "conntrackSync",
]  # fmt: skip
STATUS_KEYS = [
    "podIP", "phase", "addresses", "allocatedIPs", "allocatedIP", "gateways", "podSelector", "conditions", "holder",
    "since", "services", "conflicts",
]  # fmt: skip
DATA_KEYS = ["strategy", "underlayMTU", "cable", "wireguardPort", "resilient"]


def _fields(keys: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(st.sampled_from(keys), JSON, max_size=5)


PORT = st.fixed_dictionaries({}, optional={"port": JSON, "protocol": JSON, "name": JSON, "targetPort": JSON})
SLICE = st.fixed_dictionaries(
    {},
    optional={
        "addressType": st.sampled_from(["IPv4", "IPv6", 4]),
        "endpoints": st.lists(
            st.fixed_dictionaries({}, optional={"addresses": JSON, "conditions": JSON}) | JSON, max_size=3
        ),
    },
)
SPEC = _fields(SPEC_KEYS) | st.builds(lambda p: {"ports": p}, st.lists(PORT | JSON, max_size=3))
META = st.fixed_dictionaries(
    {"name": st.sampled_from(["default", "web", "e-gw1", "gw1", "x" * 70]) | st.text(max_size=10)},
    optional={
        "namespace": st.sampled_from(["shop", "", "a/b"]) | JSON,
        "labels": st.dictionaries(st.sampled_from(["submariner.io/gateway", "app"]), JSON, max_size=2),
        "annotations": st.dictionaries(
            st.sampled_from(["submariner.io/cniIfaceIp", "gateway.submariner.io/public-ip"]), JSON, max_size=2
        ),
    },
)
OBJECT = st.fixed_dictionaries(
    {"kind": st.sampled_from(sorted(targets.KINDS)), "metadata": META},
    optional={
        "spec": SPEC | JSON,
        "status": _fields(STATUS_KEYS) | JSON,
        "data": _fields(DATA_KEYS) | JSON,
        "slices": st.lists(SLICE | JSON, max_size=2),
    },
)


@SETTINGS
@given(OBJECT)
def test_kubernetes_objects_with_odd_fields_map_or_fail_in_one_line(obj: dict[str, Any]) -> None:
    targets.map_object(obj)


BROKER_KINDS = [
    "Cluster", "Node", "Endpoint", "Config", "Health", "Namespace", "Pod", "Service", "ServiceExport",
    "GlobalEgressIP", "ClusterGlobalEgressIP", "GlobalIngressIP", "GlobalnetStatus", "EgressConfig", "EgressVIP",
    "EgressVIPStatus", "Lease",
]  # fmt: skip
DOC_KEYS = [
    "cluster", "name", "namespace", "id", "hostname", "ip", "cni_ip", "gateway", "public_ip", "private_ip",
    "subnets", "pod_cidrs", "service_cidrs", "global_cidrs", "object", "allocatedIPs", "allocatedIP", "labels",
    "selector", "ports", "cluster_ip", "vip", "vrid", "candidates", "bindings", "vipRanges", "strategy", "backend",
    "numberOfIPs", "podSelector", "target", "targetRef", "holder", "services", "conditions", "endpoint_addresses",
]  # fmt: skip
DOCUMENT = st.builds(
    lambda kind, fields, cluster: {"kind": kind, "cluster": cluster, **fields},
    st.sampled_from(BROKER_KINDS),
    st.dictionaries(st.sampled_from(DOC_KEYS), JSON, max_size=6),
    st.sampled_from(["east", "west"]),
)


@SETTINGS
@given(st.lists(DOCUMENT, min_size=1, max_size=3))
def test_broker_files_of_every_kind_with_odd_fields_load_or_fail_in_one_line(docs: list[dict[str, Any]]) -> None:
    text = yaml.safe_dump_all(docs, sort_keys=False)
    targets.broker_file(text.encode())


SNAPSHOT_KEYS = ["version", "clusters", "nodes", "endpoints", "config", "health", "local_cluster", "globalnet"]


@SETTINGS
@given(st.dictionaries(st.sampled_from(SNAPSHOT_KEYS), JSON | st.lists(JSON, max_size=3), max_size=5))
def test_snapshot_documents_with_odd_fields_parse_or_fail_in_one_line(doc: dict[str, Any]) -> None:
    targets.snapshot_yaml(yaml.safe_dump(doc).encode())
