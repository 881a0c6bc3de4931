"""The workloads of deploy/ (flags, mounts, probes, resources), the image, the e2e script and the README.

The daemons' command lines are the contract with their flag parsers (docs/kubernetes.md): every daemon gets
``--source kube``, its node from the downward API and its cluster from the ConfigMap ``magw-config``.
"""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

from magw.snapshot.load import parse_snapshot
from tests.support.deploy_checks import BROKER_NAMESPACE, DEPLOY, NAMESPACE, find, manifests

ROOT = DEPLOY.parent
KUBE_MANIFESTS = [m for m in manifests() if "examples" not in m.path.parts]
DAEMONS = [
    ("DaemonSet", "magw-route-agent"),
    ("DaemonSet", "magw-gateway"),
    ("Deployment", "magw-globalnet"),
    ("Deployment", "magw-egress"),
    ("DaemonSet", "magw-egress-agent"),
]


def _container(kind: str, name: str) -> dict[str, Any]:
    containers = find(kind, name)["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return dict(containers[0])


def _flags(container: dict[str, Any]) -> dict[str, str]:
    args = container["args"]
    pairs = zip(args, [*args[1:], ""], strict=True)
    return {a: "" if b.startswith("--") else b for a, b in pairs if a.startswith("--")}  # "": a switch


def _env_sources(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e["valueFrom"] for e in container["env"]}


CLUSTER_FROM_CONFIG = {"configMapKeyRef": {"name": "magw-config", "key": "clusterID"}}
NODE_FROM_POD = {"fieldRef": {"fieldPath": "spec.nodeName"}}


def test_the_route_agent_runs_on_every_node_with_its_flags() -> None:
    ds = find("DaemonSet", "magw-route-agent")["spec"]["template"]["spec"]
    c = _container("DaemonSet", "magw-route-agent")
    assert c["command"] == ["magw-route-agent"]
    assert _flags(c) == {
        "--source": "kube",
        "--node": "$(NODE_NAME)",
        "--cluster": "$(CLUSTER_ID)",
        "--namespace": NAMESPACE,
        "--metrics-port": "9898",
        "--allow-init-netns": "",  # hostNetwork: the node's own namespace is the one to program
        "--status-file": "/run/magw/route-agent.json",
        "--state-dir": "/var/lib/magw",  # cable wireguard: the node's key pair, on the node only
        "--log-format": "json",
    }
    assert _env_sources(c) == {"NODE_NAME": NODE_FROM_POD, "CLUSTER_ID": CLUSTER_FROM_CONFIG}
    assert ds["hostNetwork"] is True and "nodeSelector" not in ds
    assert ds["tolerations"] == [{"operator": "Exists"}]
    assert ds["serviceAccountName"] == "magw-route-agent"
    assert {"NET_ADMIN", "NET_RAW"} <= set(c["securityContext"]["capabilities"]["add"])


def test_the_gateway_runs_on_gateway_nodes_with_the_broker_kubeconfig_mounted() -> None:
    ds = find("DaemonSet", "magw-gateway")["spec"]["template"]["spec"]
    c = _container("DaemonSet", "magw-gateway")
    flags = _flags(c)
    assert c["command"] == ["magw-gateway"]
    assert {k: flags[k] for k in ("--source", "--node", "--cluster")} == {
        "--source": "kube",
        "--node": "$(NODE_NAME)",
        "--cluster": "$(CLUSTER_ID)",
    }
    assert flags["--broker-kubeconfig"] == "/etc/magw/broker/kubeconfig"
    assert _env_sources(c) == {"NODE_NAME": NODE_FROM_POD, "CLUSTER_ID": CLUSTER_FROM_CONFIG}
    assert ds["nodeSelector"] == {"submariner.io/gateway": "true"}
    assert ds["hostNetwork"] is True and ds["serviceAccountName"] == "magw-gateway"
    mount = next(m for m in c["volumeMounts"] if m["mountPath"] == "/etc/magw/broker")
    volume = next(v for v in ds["volumes"] if v["name"] == mount["name"])
    assert mount["readOnly"] is True
    assert volume == {"name": mount["name"], "secret": {"secretName": "magw-broker-kubeconfig"}}
    caps = c["securityContext"]["capabilities"]
    assert caps == {"drop": ["ALL"], "add": ["NET_ADMIN", "NET_RAW"]} and not c["securityContext"]["privileged"]


def test_globalnet_is_one_replica_with_its_flags_and_no_host_access() -> None:
    deployment = find("Deployment", "magw-globalnet")
    pod = deployment["spec"]["template"]["spec"]
    c = _container("Deployment", "magw-globalnet")
    assert deployment["spec"]["replicas"] == 1
    assert c["command"] == ["magw-globalnet"]
    assert {k: v for k, v in _flags(c).items() if k != "--log-format"} == {
        "--source": "kube",
        "--cluster": "$(CLUSTER_ID)",
        "--namespace": NAMESPACE,
        "--metrics-port": "9103",
        "--metrics-address": "0.0.0.0",
    }
    _assert_metrics_port_is_named(c)
    assert _env_sources(c) == {"CLUSTER_ID": CLUSTER_FROM_CONFIG}
    assert "hostNetwork" not in pod and pod["securityContext"]["runAsNonRoot"] is True
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}


def _assert_metrics_port_is_named(c: dict[str, Any]) -> None:
    """A pod-network daemon serves its metrics on every pod address, on the container port named ``metrics``
    (what a scrape config or ServiceMonitor names), and its liveness probe (if any) asks that port."""
    port = int(_flags(c)["--metrics-port"])
    assert {"name": "metrics", "containerPort": port, "protocol": "TCP"} in c["ports"]
    if "livenessProbe" in c:
        assert f"http://127.0.0.1:{port}/metrics" in c["livenessProbe"]["exec"]["command"][-1]


def test_the_egress_controller_is_one_replica_serving_its_api_behind_its_service() -> None:
    deployment = find("Deployment", "magw-egress")
    pod = deployment["spec"]["template"]["spec"]
    c = _container("Deployment", "magw-egress")
    assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"] == {"type": "Recreate"}
    assert c["command"] == ["magw-egress"]
    flags = _flags(c)
    assert {k: v for k, v in flags.items() if k != "--log-format"} == {
        "--source": "kube",
        "--cluster": "$(CLUSTER_ID)",
        "--namespace": NAMESPACE,
        "--listen": "0.0.0.0:9610",
        "--tls-cert-file": "/var/run/magw-egress-tls/tls.crt",
        "--tls-key-file": "/var/run/magw-egress-tls/tls.key",
        "--metrics-port": "9104",
        "--metrics-address": "0.0.0.0",
    }
    _assert_metrics_port_is_named(c)
    # the certificate and key from the Secret magw-egress-tls, mounted where the flags read them
    mount = next(m for m in c["volumeMounts"] if m["mountPath"] == "/var/run/magw-egress-tls")
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert volume["secret"]["secretName"] == "magw-egress-tls" and mount["readOnly"] is True
    assert _env_sources(c) == {"CLUSTER_ID": CLUSTER_FROM_CONFIG}
    assert "hostNetwork" not in pod and pod["securityContext"]["runAsNonRoot"] is True
    assert pod["serviceAccountName"] == "magw-egress" and c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    service = find("Service", "magw-egress")["spec"]
    assert service["selector"].items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    (port,) = service["ports"]
    assert (
        port["port"] == 9610 and port["targetPort"] == c["ports"][0]["name"] and c["ports"][0]["containerPort"] == 9610
    )


def test_the_egress_agent_runs_on_every_node_on_the_host_network_and_reports_to_the_controllers_service() -> None:
    ds = find("DaemonSet", "magw-egress-agent")["spec"]["template"]["spec"]
    c = _container("DaemonSet", "magw-egress-agent")
    flags = _flags(c)
    assert c["command"] == ["magw-egress-agent"]
    assert {k: flags[k] for k in ("--source", "--node", "--cluster", "--namespace")} == {
        "--source": "kube",
        "--node": "$(NODE_NAME)",
        "--cluster": "$(CLUSTER_ID)",
        "--namespace": NAMESPACE,
    }
    service = find("Service", "magw-egress")
    name, namespace = service["metadata"]["name"], service["metadata"]["namespace"]
    assert flags["--controller-url"] == f"https://{name}.{namespace}.svc:{service['spec']['ports'][0]['port']}"
    assert flags["--token-file"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    ca_mount = next(m for m in c["volumeMounts"] if flags["--controller-ca-file"].startswith(m["mountPath"] + "/"))
    assert next(v for v in ds["volumes"] if v["name"] == ca_mount["name"])["configMap"] == {"name": "magw-egress-ca"}
    assert ds["hostNetwork"] is True and ds["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert ds["tolerations"] == [{"operator": "Exists"}] and "nodeSelector" not in ds
    assert ds["serviceAccountName"] == "magw-egress-agent"
    caps = c["securityContext"]["capabilities"]
    assert caps == {"drop": ["ALL"], "add": ["NET_ADMIN", "NET_RAW"]}
    assert not c["securityContext"]["privileged"]
    # the workdir is the pod's own (keepalived and conntrackd end with the pod): an emptyDir
    mount = next(m for m in c["volumeMounts"] if m["mountPath"] == flags["--workdir"])
    assert next(v for v in ds["volumes"] if v["name"] == mount["name"]) == {"name": mount["name"], "emptyDir": {}}
    assert ds["containers"][0]["readinessProbe"]["httpGet"]["port"] == int(flags["--status-listen"].rpartition(":")[2])


def _host_dir(kind: str, name: str, path: str) -> str:
    """The host directory mounted over the container directory that holds ``path``."""
    pod = find(kind, name)["spec"]["template"]["spec"]
    mount = next(m for m in _container(kind, name)["volumeMounts"] if path.startswith(m["mountPath"] + "/"))
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    return str(volume["hostPath"]["path"]) + path.removeprefix(mount["mountPath"])


def test_the_gateway_reads_the_status_file_its_route_agent_writes() -> None:
    """The Gateway status's connections come from the route agent of the same node: one host file."""
    written = _flags(_container("DaemonSet", "magw-route-agent"))["--status-file"]
    read = _flags(_container("DaemonSet", "magw-gateway"))["--health-status-file"]
    assert _host_dir("DaemonSet", "magw-route-agent", written) == _host_dir("DaemonSet", "magw-gateway", read)


def test_the_gateway_and_its_route_agent_share_the_nodes_key_directory() -> None:
    """cable wireguard: the gateway publishes the public key of the key pair whose private key the route agent
    gives its device, so both --state-dir are one host directory, writable by both (either may make the pair)."""
    agent = _flags(_container("DaemonSet", "magw-route-agent"))["--state-dir"] + "/wireguard"
    gateway = _flags(_container("DaemonSet", "magw-gateway"))["--state-dir"] + "/wireguard"
    assert _host_dir("DaemonSet", "magw-route-agent", agent) == _host_dir("DaemonSet", "magw-gateway", gateway)
    for kind in ("magw-route-agent", "magw-gateway"):
        mounts = {m["mountPath"]: m for m in _container("DaemonSet", kind)["volumeMounts"]}
        assert not mounts["/var/lib/magw"].get("readOnly", False)


def test_host_network_daemons_probe_their_own_metrics_port_and_do_not_share_it() -> None:
    """Route agent and gateway share a gateway node's network namespace: two ports, each probed on its own."""
    ports = {}
    for name in ("magw-route-agent", "magw-gateway"):
        c = _container("DaemonSet", name)
        port = _flags(c)["--metrics-port"]
        for probe in ("livenessProbe", "readinessProbe"):
            assert f"http://127.0.0.1:{port}/metrics" in c[probe]["exec"]["command"][-1]
        ports[name] = port
    assert len(set(ports.values())) == 2


@pytest.mark.parametrize(("kind", "name"), DAEMONS)
def test_every_daemon_has_requests_and_limits_and_a_read_only_root(kind: str, name: str) -> None:
    c = _container(kind, name)
    assert set(c["resources"]) == {"requests", "limits"}
    assert set(c["resources"]["requests"]) == set(c["resources"]["limits"]) == {"cpu", "memory"}
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert c["image"] == "magw:0.1.0"


def test_the_config_map_holds_values_magw_accepts() -> None:
    """strategy and underlayMTU pass magw's own snapshot checks; clusterID is a DNS-1123 label."""
    data = find("ConfigMap", "magw-config")["data"]
    cluster = data["clusterID"]
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", cluster)
    doc = {
        "local_cluster": cluster,
        "strategy": data["strategy"],
        "underlay_mtu": int(data["underlayMTU"]),
        "clusters": [{"id": cluster, "pod_cidrs": ["10.1.0.0/16"], "service_cidrs": ["100.1.0.0/16"]}],
    }
    config = parse_snapshot(doc).config
    assert (config.strategy.value, config.underlay_mtu) == (data["strategy"], int(data["underlayMTU"]))


def test_every_namespaced_object_lives_in_magws_namespaces() -> None:
    for m in KUBE_MANIFESTS:
        namespace = m.doc["metadata"].get("namespace")
        assert namespace in (None, NAMESPACE, BROKER_NAMESPACE), m
        assert (namespace == BROKER_NAMESPACE) == ("broker" in m.path.parts) or m.kind == "Namespace", m


# ----- Dockerfile, e2e script, README ----------------------------------------------------------------------


def test_the_image_holds_every_daemon_on_debian_12() -> None:
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    assert re.search(r"^FROM debian:(12|bookworm)\S*", text, re.M)
    # conntrack: the egress agent's purge of a lost VIP's entries (magw/drivers/conntrackd/purge.py)
    # iperf3: the pods of magw benchmark --kubeconfig (magw/ops/bench/kube.py)
    pkgs = ("python3-nftables", "iproute2", "nftables", "keepalived", "conntrackd", "conntrack", "iperf3")
    assert all(re.search(rf"\s{pkg}\s", text) for pkg in pkgs), pkgs
    assert re.search(r"pip install .*/src", text)
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    for name in ("magw-route-agent", "magw-gateway", "magw-globalnet"):
        assert name in scripts
        assert any(_container(kind, daemon)["command"] == [name] for kind, daemon in DAEMONS)


def test_the_e2e_script_parses_and_names_only_files_that_exist() -> None:
    """scripts/e2e-kind.sh is not run here (no kind, no Docker): bash parses it and its deploy/ paths exist."""
    script = ROOT / "scripts" / "e2e-kind.sh"
    subprocess.run(["bash", "-n", str(script)], check=True, timeout=10)
    named = set(re.findall(r"deploy/[\w./-]+\.yaml", script.read_text(encoding="utf-8")))
    assert named and all((ROOT / path).is_file() for path in named), named


def _plain_files() -> list[Path]:
    """deploy/'s files, the Helm chart and the kustomize overlays apart (docs/helm.md describes those)."""
    packaged = (DEPLOY / "helm", DEPLOY / "kustomize")
    return [p for p in DEPLOY.rglob("*") if p.is_file() and not any(p.is_relative_to(d) for d in packaged)]


def test_the_readme_names_every_file_of_deploy() -> None:
    readme = (DEPLOY / "README.md").read_text(encoding="utf-8")
    files = [str(p.relative_to(DEPLOY)) for p in _plain_files() if p.name != "README.md"]
    missing = [f for f in [*files, "helm/magw", "kustomize/"] if f not in readme]
    assert missing == []


def test_paths_under_deploy_are_yaml_the_readme_or_the_egress_patch() -> None:
    """Manifests, the README, the JSON patch for ``kubectl patch --type=json`` (not a manifest to apply), and the
    Grafana dashboard (imported in Grafana; tests/unit/metrics/test_catalogue.py checks its queries)."""
    others = {p.relative_to(DEPLOY) for p in _plain_files() if p.suffix != ".yaml"}
    assert others == {Path("README.md"), Path("egress-route-agent.patch.json"), Path("grafana/magw.json")}
