"""RBAC of deploy/ pinned to least privilege (docs/kubernetes.md): who may write what, in which namespace.

The grants are collected from the bindings as the API server would resolve them (tests/support/deploy_checks.py
``grants``): a ClusterRoleBinding grants cluster-wide, a RoleBinding only in its namespace. The route agent's
patch on Nodes is narrowed further by a ValidatingAdmissionPolicy (tests/deploy/test_deploy_cel.py evaluates it).
"""

from __future__ import annotations

from tests.support.deploy_checks import BROKER_NAMESPACE, NAMESPACE, WRITE_VERBS, Grant, grants, manifests

KUBE_MANIFESTS = [m for m in manifests() if "examples" not in m.path.parts]


def _writes(found: set[Grant]) -> set[tuple[str, str]]:
    return {(g.group, g.resource) for g in found if g.verb in WRITE_VERBS}


def test_nobody_has_wildcards() -> None:
    for m in KUBE_MANIFESTS:
        for rule in m.doc.get("rules", ()):
            for key in ("apiGroups", "resources", "verbs", "resourceNames"):
                assert "*" not in rule.get(key, ()), f"{m}: {key}"


def test_the_route_agent_only_reads_and_patches_nodes() -> None:
    """No create, update or delete anywhere; the one write is patch on nodes (limited further by the policy)."""
    found = grants(NAMESPACE, "magw-route-agent")
    assert {g.verb for g in found} == {"get", "list", "watch", "patch"}
    assert {(g.namespace, g.group, g.resource) for g in found if g.verb == "patch"} == {("", "", "nodes")}
    reads = {(g.group, g.resource) for g in found if g.verb == "watch"}
    assert {("", "nodes"), ("", "pods"), ("discovery.k8s.io", "endpointslices"), ("", "configmaps")} <= reads
    assert {("submariner.io", "endpoints"), ("multicluster.x-k8s.io", "serviceexports")} <= reads


def test_the_gateway_writes_endpoints_gateways_and_leases_and_nothing_of_pods() -> None:
    """Writes in magw's namespace only; its Gateway is created and its status merge-patched, never replaced;
    no workload at all (its source lists Nodes, magw's objects and the egress kinds only)."""
    found = grants(NAMESPACE, "magw-gateway")
    assert _writes(found) == {
        ("submariner.io", "endpoints"),
        ("submariner.io", "clusters"),  # remote Clusters synced down from the broker
        ("submariner.io", "gateways"),
        ("submariner.io", "gateways/status"),
        ("coordination.k8s.io", "leases"),
    }
    assert {g.namespace for g in found if g.verb in WRITE_VERBS} == {NAMESPACE}
    assert {g.verb for g in found if g.resource == "gateways"} == {"get", "create"}
    assert {g.verb for g in found if g.resource == "gateways/status"} == {"patch"}
    assert {g.verb for g in found if g.resource == "leases"} == {"get", "create", "update"}
    workloads = {"pods", "namespaces", "endpointslices", "serviceexports", "globalingressips"}
    assert not [g for g in found if g.resource in workloads]
    # --public-service: the LoadBalancer Service in front of it, read by name in magw's namespace
    assert {(g.verb, g.namespace) for g in found if g.resource == "services"} == {("get", NAMESPACE)}


def test_globalnet_writes_its_statuses_ingress_ips_cluster_egress_ips_and_its_lease() -> None:
    found = grants(NAMESPACE, "magw-globalnet")
    assert _writes(found) == {
        ("submariner.io", "globalingressips"),
        ("submariner.io", "clusterglobalegressips"),
        ("submariner.io", "globalegressips/status"),
        ("submariner.io", "globalingressips/status"),
        ("submariner.io", "clusterglobalegressips/status"),
        ("coordination.k8s.io", "leases"),
    }
    leases = {(g.verb, g.names) for g in found if g.resource == "leases"}
    assert leases == {("create", ()), ("get", ("magw-globalnet",)), ("update", ("magw-globalnet",))}
    statuses = {g.verb for g in found if g.resource.endswith("/status")}
    assert statuses == {"patch"}  # merge patches through the status subresource, nothing else


def test_the_route_agent_reads_the_egress_kinds_in_magws_namespace() -> None:
    """It plans the egress datapath from EgressVIPs and the EgressConfig (docs/egress-gateway.md)."""
    found = grants(NAMESPACE, "magw-route-agent")
    egress = {(g.namespace, g.resource, g.verb) for g in found if g.resource in ("egressvips", "egressconfigs")}
    assert egress == {(NAMESPACE, r, v) for r in ("egressvips", "egressconfigs") for v in ("get", "list", "watch")}


def test_the_egress_controller_patches_egress_vips_and_their_status_only() -> None:
    """Bindings and statuses are merge patches of the EgressVIPs in magw's namespace; everything else is read."""
    found = grants(NAMESPACE, "magw-egress")
    assert {(g.namespace, g.group, g.resource, g.verb) for g in found if g.verb in WRITE_VERBS} == {
        (NAMESPACE, "submariner.io", "egressvips", "patch"),
        (NAMESPACE, "submariner.io", "egressvips/status", "patch"),
        # its API's TokenReviews and SubjectAccessReviews (system:auth-delegator), cluster-wide as they are
        ("", "authentication.k8s.io", "tokenreviews", "create"),
        ("", "authorization.k8s.io", "subjectaccessreviews", "create"),
    }
    reads = {(g.group, g.resource) for g in found if g.verb == "watch"}
    assert {("", "pods"), ("", "services"), ("", "namespaces"), ("discovery.k8s.io", "endpointslices")} <= reads
    assert {("submariner.io", "egressvips"), ("submariner.io", "egressconfigs"), ("", "nodes")} <= reads


def test_the_egress_agent_only_reads_nodes_and_the_egress_kinds() -> None:
    found = grants(NAMESPACE, "magw-egress-agent")
    assert {g.verb for g in found} == {"get", "list", "watch", "report"}
    # report: the SubjectAccessReview verb of its POST /master_notify to magw-egress, on egressvips only
    assert {(g.group, g.resource) for g in found if g.verb == "report"} == {("submariner.io", "egressvips")}
    assert {("", "nodes"), ("submariner.io", "egressvips"), ("submariner.io", "egressconfigs")} <= {
        (g.group, g.resource) for g in found
    }
    assert not [g for g in found if g.resource in {"pods", "services", "namespaces", "endpointslices"}]


def test_the_broker_client_reads_and_writes_endpoints_and_clusters_only() -> None:
    found = grants(BROKER_NAMESPACE, "magw-broker-client")
    assert {(g.namespace, g.group, g.resource) for g in found} == {
        (BROKER_NAMESPACE, "submariner.io", "endpoints"),
        (BROKER_NAMESPACE, "submariner.io", "clusters"),
    }


def test_every_binding_names_a_role_and_a_service_account_that_exist() -> None:
    kinds = {(m.kind, m.doc["metadata"].get("namespace", ""), m.name) for m in KUBE_MANIFESTS}
    for m in KUBE_MANIFESTS:
        if m.kind in ("RoleBinding", "ClusterRoleBinding"):
            ref = m.doc["roleRef"]
            scope = "" if ref["kind"] == "ClusterRole" else m.doc["metadata"]["namespace"]
            builtin = ref["kind"] == "ClusterRole" and ref["name"] == "system:auth-delegator"
            assert builtin or (ref["kind"], scope, ref["name"]) in kinds, m
            for subject in m.doc["subjects"]:
                assert ("ServiceAccount", subject["namespace"], subject["name"]) in kinds, m
