"""The lab kubelet's kube-proxy (magw.lab.kubelet.proxy): Services and Pods (dicts as the API returns them) in,
the ``lab-kube-api`` nftables script out.

The script is read back into its chains and each dispatch rule followed to the endpoints it DNATs to, so the tests
compare sets (ClusterIP, protocol, port) -> {(pod IP, target port)} and depend neither on the order of the pods nor
on the endpoint chains' numbering. One test has the real ``nft`` check the script (``nft --check``: parsed and
validated, nothing applied, no namespace made).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from magw.lab.kubelet import proxy

NS = "shop"
CLUSTER_IP = "10.96.0.10"
REJECT = "reject"
HEADER = "table ip lab-kube-api {}\ndelete table ip lab-kube-api\ntable ip lab-kube-api {\n"

Obj = dict[str, Any]
Routes = dict[tuple[str, str, int], frozenset[tuple[str, int]] | str]

_DISPATCH = re.compile(
    r'ip daddr (?P<ip>\S+) (?P<l4>tcp|udp|sctp) dport (?P<port>\d+) (?:reject|goto (?P<chain>\S+)) '
    r'comment "service (?P<who>[^"]+)"'
)
_PICK = re.compile(r"numgen random mod (?P<n>\d+) vmap \{ (?P<map>.*) \}")


def _service(
    name: str = "web",
    *,
    namespace: str = NS,
    cluster_ip: str | None = CLUSTER_IP,
    selector: dict[str, str] | None = None,
    ports: list[Obj] | None = None,
    **spec: Any,
) -> Obj:
    body: Obj = {"selector": {"app": "web"} if selector is None else selector, **spec}
    if cluster_ip is not None:
        body["clusterIP"] = cluster_ip
    body["ports"] = (
        ports
        if ports is not None
        else [
            {"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"},
            {"name": "dns", "port": 53, "targetPort": 5353, "protocol": "UDP"},
        ]
    )
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"namespace": namespace, "name": name}, "spec": body}


def _pod(
    name: str,
    ip: str | None,
    *,
    namespace: str = NS,
    labels: dict[str, str] | None = None,
    phase: str = "Running",
    ready: bool = True,
    deleting: bool = False,
) -> Obj:
    status: Obj = {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    if ip is not None:
        status["podIP"] = ip
    labels = {"app": "web", "tier": "front"} if labels is None else labels
    meta: Obj = {"namespace": namespace, "name": name, "labels": labels}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-02T00:00:00Z"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {}, "status": status}


def _chains(text: str) -> dict[str, list[str]]:
    """chain name -> its lines (base chain declaration included), in order."""
    chains: dict[str, list[str]] = {}
    current: str | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if m := re.fullmatch(r"chain (\S+) \{", stripped):
            assert m[1] not in chains, f"chain {m[1]} twice"
            current = m[1]
            chains[current] = []
        elif stripped == "}":
            current = None
        elif current is not None:
            chains[current].append(stripped)
    return chains


def _endpoints(chains: dict[str, list[str]], chain: str, l4: str) -> frozenset[tuple[str, int]]:
    """The (pod IP, port) a Service port's chain DNATs to, checking its ``numgen`` covers every endpoint once."""
    (rule,) = chains[chain]
    pick = _PICK.fullmatch(rule)
    assert pick, rule
    targets = dict(entry.split(" : goto ") for entry in pick["map"].split(", "))
    assert sorted(targets, key=int) == [str(i) for i in range(int(pick["n"]))]
    found = set()
    for target in targets.values():
        mark, dnat = chains[target]
        d = re.fullmatch(rf"meta l4proto {l4} dnat to (\S+):(\d+)", dnat)
        assert d, dnat
        assert mark == f"ip saddr {d[1]} meta mark set meta mark | 0x4000"  # hairpin: masqueraded
        found.add((d[1], int(d[2])))
    assert len(found) == len(targets), f"an endpoint twice in {chain}"
    return frozenset(found)


def _routes(text: str) -> Routes:
    """(ClusterIP, l4, port) -> the endpoints it DNATs to, or REJECT."""
    chains = _chains(text)
    routes: Routes = {}
    for rule in chains["services"]:
        m = _DISPATCH.fullmatch(rule)
        assert m, rule
        key = (m["ip"], m["l4"], int(m["port"]))
        assert key not in routes, f"{key} dispatched twice"
        routes[key] = REJECT if m["chain"] is None else _endpoints(chains, m["chain"], m["l4"])
    return routes


def _eps(*ips: str, port: int) -> frozenset[tuple[str, int]]:
    return frozenset((ip, port) for ip in ips)


TWO_PODS = [_pod("web-a", "10.244.1.5"), _pod("web-b", "10.244.2.7")]


# --- endpoints and dispatch ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("pods", list(itertools.permutations(TWO_PODS)))
def test_each_port_and_protocol_is_dnated_to_each_running_pod(pods: tuple[Obj, ...]) -> None:
    routes = _routes(proxy.script([_service()], pods))
    assert routes == {
        (CLUSTER_IP, "tcp", 80): _eps("10.244.1.5", "10.244.2.7", port=8080),
        (CLUSTER_IP, "udp", 53): _eps("10.244.1.5", "10.244.2.7", port=5353),
    }


def test_dispatch_rules_name_the_service_port() -> None:
    services = _chains(proxy.script([_service()], TWO_PODS))["services"]
    assert len(services) == 2
    assert services[0].startswith(f"ip daddr {CLUSTER_IP} tcp dport 80 goto ")
    assert services[0].endswith(' comment "service shop/web:80/tcp"')
    assert services[1].startswith(f"ip daddr {CLUSTER_IP} udp dport 53 goto ")
    assert services[1].endswith(' comment "service shop/web:53/udp"')


@pytest.mark.parametrize(
    "other",
    [
        pytest.param(_pod("elsewhere", "10.244.3.1", namespace="other"), id="another-namespace"),
        pytest.param(_pod("pending", "10.244.3.2", phase="Pending"), id="pending"),
        pytest.param(_pod("done", "10.244.3.3", phase="Succeeded"), id="succeeded"),
        pytest.param(_pod("failed", "10.244.3.4", phase="Failed"), id="failed"),
        pytest.param(_pod("no-ip", None), id="no-pod-ip"),
        pytest.param(_pod("empty-ip", ""), id="empty-pod-ip"),
        pytest.param(_pod("db", "10.244.3.5", labels={"app": "db", "tier": "front"}), id="other-label-value"),
        pytest.param(_pod("bare", "10.244.3.6", labels={}), id="no-labels"),
        pytest.param(_pod("half", "10.244.3.7", labels={"app": "web"}), id="part-of-the-selector"),
        pytest.param(_pod("unready", "10.244.3.8", ready=False), id="not-ready"),
        pytest.param(_pod("going", "10.244.3.9", deleting=True), id="being-deleted"),
        pytest.param(_pod("v6", "fd00::5"), id="ipv6-pod-ip"),
        pytest.param(_pod("junk", "not-an-ip"), id="malformed-pod-ip"),
    ],
)
def test_pods_that_are_not_endpoints(other: Obj) -> None:
    """Only the Running pods with an IP, in the Service's namespace, whose labels hold its whole selector (each
    pod here fails one of these only)."""
    svc = _service(selector={"app": "web", "tier": "front"})
    good = _pod("web-a", "10.244.1.5", labels={"app": "web", "tier": "front", "extra": "x"})
    for pods in ([other, good], [good, other]):
        assert _routes(proxy.script([svc], pods)) == {
            (CLUSTER_IP, "tcp", 80): _eps("10.244.1.5", port=8080),
            (CLUSTER_IP, "udp", 53): _eps("10.244.1.5", port=5353),
        }
    # alone, it is no endpoint at all: the Service's ports are rejected
    assert set(_routes(proxy.script([svc], [other])).values()) == {REJECT}


def test_a_port_listed_twice_is_one_rule() -> None:
    """A Service repeating a port and protocol (a real server refuses it) gives one rule, not two chains of one
    name, which would fail the whole table's load."""
    twice = [{"port": 80, "targetPort": 8080, "protocol": "TCP"}, {"port": 80, "targetPort": 9090, "protocol": "TCP"}]
    text = proxy.script([_service(ports=twice)], TWO_PODS)
    assert _routes(text) == {(CLUSTER_IP, "tcp", 80): _eps("10.244.1.5", "10.244.2.7", port=8080)}
    assert text.count("chain api-svc-") == len(set(line for line in text.splitlines() if "chain api-svc-" in line))


def test_without_ready_endpoints_each_port_is_rejected() -> None:
    text = proxy.script([_service()], [_pod("pending", "10.244.3.2", phase="Pending")])
    assert _routes(text) == {(CLUSTER_IP, "tcp", 80): REJECT, (CLUSTER_IP, "udp", 53): REJECT}
    assert "api-svc-" not in text and "dnat" not in text


def test_services_of_the_same_name_in_two_namespaces_reach_their_own_pods() -> None:
    services = [_service(namespace="a", cluster_ip="10.96.0.1"), _service(namespace="b", cluster_ip="10.96.0.2")]
    pods = [_pod("w", "10.244.1.1", namespace="a"), _pod("w", "10.244.2.1", namespace="b")]
    routes = _routes(proxy.script(services, pods))
    assert routes == {
        ("10.96.0.1", "tcp", 80): _eps("10.244.1.1", port=8080),
        ("10.96.0.1", "udp", 53): _eps("10.244.1.1", port=5353),
        ("10.96.0.2", "tcp", 80): _eps("10.244.2.1", port=8080),
        ("10.96.0.2", "udp", 53): _eps("10.244.2.1", port=5353),
    }


def test_port_defaults_target_port_and_protocol() -> None:
    """No targetPort: the port itself; no protocol: TCP; protocols in any case; SCTP too."""
    ports: list[Obj] = [
        {"port": 80},
        {"port": 9000, "protocol": "udp", "targetPort": 9001},
        {"port": 7, "protocol": "SCTP"},
    ]
    routes = _routes(proxy.script([_service(ports=ports)], TWO_PODS))
    assert routes == {
        (CLUSTER_IP, "tcp", 80): _eps("10.244.1.5", "10.244.2.7", port=80),
        (CLUSTER_IP, "udp", 9000): _eps("10.244.1.5", "10.244.2.7", port=9001),
        (CLUSTER_IP, "sctp", 7): _eps("10.244.1.5", "10.244.2.7", port=7),
    }


def test_a_pod_listed_twice_is_one_endpoint() -> None:
    routes = _routes(proxy.script([_service()], [*TWO_PODS, TWO_PODS[0]]))
    assert routes[(CLUSTER_IP, "tcp", 80)] == _eps("10.244.1.5", "10.244.2.7", port=8080)


# --- what is left out ---------------------------------------------------------------------------------------------


def _empty() -> str:
    return proxy.script([], TWO_PODS)


@pytest.mark.parametrize(
    "svc",
    [
        pytest.param(_service(cluster_ip="None"), id="headless"),
        pytest.param(_service(cluster_ip=None), id="no-cluster-ip"),
        pytest.param(_service(cluster_ip=""), id="empty-cluster-ip"),
        pytest.param(_service(selector={}), id="selector-less"),
        pytest.param(
            _service(cluster_ip=None, type="ExternalName", externalName="db.example.com"), id="external-name"
        ),
        pytest.param(_service(type="ExternalName", externalName="db.example.com"), id="external-name-with-ip"),
        pytest.param(_service(ports=[{"port": 80, "targetPort": "http"}]), id="named-target-port"),
        pytest.param(_service(ports=[]), id="no-ports"),
        pytest.param(_service(cluster_ip="fd00::10"), id="ipv6-cluster-ip"),
    ],
)
def test_services_left_out(svc: Obj) -> None:
    assert _routes(proxy.script([svc], TWO_PODS)) == {}
    assert proxy.script([svc], TWO_PODS) == _empty()


def test_a_selector_less_service_is_left_out_even_with_no_selector_key() -> None:
    svc = _service()
    del svc["spec"]["selector"]
    assert proxy.script([svc], TWO_PODS) == _empty()


def test_a_named_target_port_leaves_out_that_port_only() -> None:
    ports: list[Obj] = [{"port": 80, "targetPort": "http"}, {"port": 443, "targetPort": 8443}]
    routes = _routes(proxy.script([_service(ports=ports)], TWO_PODS))
    assert routes == {(CLUSTER_IP, "tcp", 443): _eps("10.244.1.5", "10.244.2.7", port=8443)}


def test_services_in_skip_are_left_out() -> None:
    services = [
        _service("web", cluster_ip="10.96.0.1"),
        _service("web", namespace="other", cluster_ip="10.96.0.2"),
        _service("api", cluster_ip="10.96.0.3"),
    ]
    routes = _routes(proxy.script(services, TWO_PODS, skip={(NS, "web"), ("nowhere", "api")}))
    assert {ip for ip, _, _ in routes} == {"10.96.0.2", "10.96.0.3"}
    assert routes[("10.96.0.3", "tcp", 80)] == _eps("10.244.1.5", "10.244.2.7", port=8080)
    assert routes[("10.96.0.2", "tcp", 80)] == REJECT  # no pod in namespace "other"
    assert proxy.script(services, TWO_PODS, skip=[(NS, "web"), ("other", "web"), (NS, "api")]) == _empty()


# --- the script as a whole ----------------------------------------------------------------------------------------


def test_the_script_replaces_the_table_in_one_transaction() -> None:
    text = proxy.script([_service()], TWO_PODS)
    assert text.startswith(HEADER)  # create-if-missing, delete, recreate: one `nft -f` swaps it atomically
    assert text.endswith("}\n")
    assert text.count("table ip lab-kube-api") == 3
    chains = _chains(text)
    assert chains["prerouting"] == ["type nat hook prerouting priority dstnat; policy accept;", "jump services"]
    assert chains["output"] == ["type nat hook output priority -100; policy accept;", "jump services"]
    assert chains["postrouting"] == [
        "type nat hook postrouting priority srcnat; policy accept;",
        "meta mark & 0x4000 == 0x4000 masquerade",
    ]


def test_no_services_still_gives_the_table_and_its_hooks() -> None:
    text = _empty()
    assert text.startswith(HEADER)
    chains = _chains(text)
    assert chains["services"] == []
    assert set(chains) == {"services", "prerouting", "output", "postrouting"}


def _world() -> tuple[list[Obj], list[Obj]]:
    services = [
        _service("web", cluster_ip="10.96.0.10"),
        _service("api", cluster_ip="10.96.0.11", selector={"app": "api"}, ports=[{"port": 8080}]),
        _service("web", namespace="other", cluster_ip="10.96.0.12"),
        _service("gone", cluster_ip="10.96.0.13", selector={"app": "gone"}),
    ]
    pods = [
        _pod("web-a", "10.244.1.5"),
        _pod("web-b", "10.244.2.7"),
        _pod("web-c", "10.244.1.10"),
        _pod("api-a", "10.244.2.9", labels={"app": "api"}),
        _pod("web-x", "10.244.3.3", namespace="other"),
        _pod("web-p", "10.244.3.4", phase="Pending"),
    ]
    return services, pods


def test_the_output_is_the_same_whatever_the_input_order() -> None:
    services, pods = _world()
    first = proxy.script(services, pods)
    for svc_order in itertools.permutations(services):
        for pod_order in (pods, pods[::-1], pods[2:] + pods[:2], pods[1::2] + pods[::2]):
            assert proxy.script(list(svc_order), list(pod_order)) == first
    routes = _routes(first)
    assert routes[("10.96.0.10", "tcp", 80)] == _eps("10.244.1.5", "10.244.2.7", "10.244.1.10", port=8080)
    assert routes[("10.96.0.11", "tcp", 8080)] == _eps("10.244.2.9", port=8080)
    assert routes[("10.96.0.12", "udp", 53)] == _eps("10.244.3.3", port=5353)
    assert routes[("10.96.0.13", "tcp", 80)] == REJECT


_RENDER = "import json, sys; from magw.lab.kubelet import proxy; print(proxy.script(*json.load(sys.stdin)), end='')"


@pytest.mark.parametrize("seed", ["0", "1", "2", "3"])
def test_the_output_does_not_depend_on_string_hashing(seed: str) -> None:
    """Another process (another PYTHONHASHSEED: sets of strings iterate in another order) renders the same text."""
    services, pods = _world()
    env = {**os.environ, "PYTHONHASHSEED": seed}
    done = subprocess.run(
        [sys.executable, "-c", _RENDER], input=json.dumps([services, pods]), capture_output=True, text=True,
        env=env, timeout=60, check=True,
    )  # fmt: skip
    assert done.stdout == proxy.script(services, pods)


def test_services_are_dispatched_in_namespace_then_name_order() -> None:
    services, pods = _world()
    rules = _chains(proxy.script(services[::-1], pods))["services"]
    who = [m["who"] for m in map(_DISPATCH.fullmatch, rules) if m]
    assert len(who) == len(rules)
    assert who == [
        "other/web:80/tcp",
        "other/web:53/udp",
        "shop/api:8080/tcp",
        "shop/gone:80/tcp",
        "shop/gone:53/udp",
        "shop/web:80/tcp",
        "shop/web:53/udp",
    ]


# --- the real nft -------------------------------------------------------------------------------------------------


def _nft_check(path: Path) -> subprocess.CompletedProcess[str]:
    """``nft --check -f``: parse and validate (the kernel sees the batch and drops it), apply nothing."""
    nft = shutil.which("nft")
    if nft is None:
        pytest.skip("no nft binary on PATH")
    return subprocess.run([nft, "--check", "-f", str(path)], capture_output=True, text=True, timeout=30, check=False)


def _first_error(result: subprocess.CompletedProcess[str]) -> str:
    lines = (result.stderr or result.stdout).strip().splitlines()
    return next((line for line in lines if "Error" in line), lines[0] if lines else f"exit {result.returncode}")


def test_nft_accepts_the_script(tmp_path: Path) -> None:
    probe = tmp_path / "probe.nft"
    probe.write_text("table ip magw-nft-check-probe {\n\tchain c {\n\t}\n}\n")
    result = _nft_check(probe)
    if result.returncode != 0:
        pytest.skip(f"`nft --check -f` is not usable here: {_first_error(result)}")

    services, pods = _world()
    services.append(_service("sctp", cluster_ip="10.96.0.20", ports=[{"port": 7, "protocol": "SCTP"}]))
    script = tmp_path / "lab-kube-api.nft"
    script.write_text(proxy.script(services, pods))
    result = _nft_check(script)
    assert result.returncode == 0, result.stderr

    # the check does check: a rule that goes to no chain is refused
    broken = tmp_path / "broken.nft"
    broken.write_text(proxy.script(services, pods).replace("goto api-svc-shop.web-tcp80 ", "goto api-svc-nowhere ", 1))
    assert broken.read_text() != script.read_text()
    assert _nft_check(broken).returncode != 0
