"""The real kubectl (.venv/bin/kubectl) against the emulator: what an operator does with a magw kube lab.

One emulator for the module (on a thread inside a throwaway network namespace: tests/support/kubectl_emulator),
one Kubernetes namespace per test. Every check reads back the state the emulator holds, or compares kubectl's
table with the CRD manifest's own printer columns.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from magw.kubeemu import Emulator
from magw.kubeemu.errors import ApiError
from tests.support.kubectl_emulator import KUBECTL, KubectlEmulator, crd_docs, finish, kubectl_emulator

pytestmark = [pytest.mark.kernel, pytest.mark.skipif(not KUBECTL.exists(), reason=f"no kubectl at {KUBECTL}")]

GEIP = ("submariner.io", "v1", "globalegressips")


@pytest.fixture(scope="module")
def kc() -> Iterator[KubectlEmulator]:
    with kubectl_emulator() as env:
        yield env


def _get(kc: KubectlEmulator, key: tuple[str, str, str], ns: str, name: str) -> dict[str, Any] | None:
    def read(emu: Emulator) -> dict[str, Any] | None:
        rt = emu.store.registry.find(*key)
        assert rt is not None
        try:
            return dict(emu.store.get(rt, ns, name))
        except ApiError:
            return None

    return kc.read(read)


def _namespace(kc: KubectlEmulator, name: str) -> str:
    kc.run("create", "namespace", name)
    return name


def _geip(ns: str, name: str = "geip", spec: str = "numberOfIPs: 2") -> str:
    return f"""apiVersion: submariner.io/v1
kind: GlobalEgressIP
metadata: {{name: {name}, namespace: {ns}}}
spec: {{{spec}, podSelector: {{matchLabels: {{app: web}}}}}}
"""


def test_create_namespace_and_configmap_sent_as_protobuf(kc: KubectlEmulator) -> None:
    """kubectl sends these built-in kinds as protobuf and does not resend JSON on a 415: the emulator decodes."""
    out = kc.run("create", "namespace", "kc-proto").stdout
    assert "namespace/kc-proto created" in out
    assert _get(kc, ("", "v1", "namespaces"), "", "kc-proto") is not None
    kc.run("create", "configmap", "conf", "-n", "kc-proto", "--from-literal=a=1", "--from-literal=b=two")
    cm = _get(kc, ("", "v1", "configmaps"), "kc-proto", "conf")
    assert cm is not None and cm["data"] == {"a": "1", "b": "two"}
    assert kc.run("get", "ns", "kc-proto", "-o", "name").stdout.strip() == "namespace/kc-proto"


def test_get_shows_the_crd_printer_columns(kc: KubectlEmulator) -> None:
    ns = _namespace(kc, "kc-get")
    obj = {
        "apiVersion": "submariner.io/v1",
        "kind": "GlobalEgressIP",
        "metadata": {"name": "web", "namespace": ns},
        "spec": {"numberOfIPs": 2},
        "status": {"conditions": [{"type": "Allocated", "status": "True"}], "allocatedIPs": ["242.0.0.7"]},
    }
    kc.read(lambda emu: emu.load([obj]))
    crd = next(d for d in crd_docs() if d["spec"]["names"]["plural"] == "globalegressips")
    columns = crd["spec"]["versions"][0]["additionalPrinterColumns"]
    header, row = kc.run("get", "globalegressips", "-n", ns).stdout.splitlines()
    assert header.split() == ["NAME", *(c["name"].upper() for c in columns if not c.get("priority"))]
    cells = row.split()
    assert cells[:3] == ["web", "2", "True"] and "242.0.0.7" in cells[3]
    wide = kc.run("get", "gateways", "-A", "-o", "wide").stdout  # nothing there: kubectl says so, no error
    assert wide.strip() == "" or "No resources" in wide


def test_apply_validates_against_the_crd_schema(kc: KubectlEmulator) -> None:
    ns = _namespace(kc, "kc-apply")
    bad = kc.run("apply", "-f", "-", stdin=_geip(ns, spec="numberOfIPz: 2"), check=False)
    assert bad.returncode != 0 and 'unknown field "spec.numberOfIPz"' in bad.stderr
    assert _get(kc, GEIP, ns, "geip") is None
    assert "created" in kc.run("apply", "-f", "-", stdin=_geip(ns)).stdout
    assert "configured" in kc.run("apply", "-f", "-", stdin=_geip(ns, spec="numberOfIPs: 3")).stdout
    obj = _get(kc, GEIP, ns, "geip")
    assert obj is not None and obj["spec"]["numberOfIPs"] == 3
    assert "kubectl.kubernetes.io/last-applied-configuration" in obj["metadata"]["annotations"]
    again = kc.run("apply", "-f", "-", stdin=_geip(ns, spec="numberOfIPs: 3, selector: {}"), check=False)
    assert again.returncode != 0 and 'unknown field "spec.selector"' in again.stderr
    obj = _get(kc, GEIP, ns, "geip")
    assert obj is not None and "selector" not in obj["spec"]


def test_apply_a_namespace_twice_changes_its_labels(kc: KubectlEmulator) -> None:
    doc = "apiVersion: v1\nkind: Namespace\nmetadata: {{name: kc-ns-apply, labels: {{tier: '{}'}}}}\n"
    kc.run("apply", "-f", "-", stdin=doc.format("one"))
    kc.run("apply", "-f", "-", stdin=doc.format("two"))
    obj = _get(kc, ("", "v1", "namespaces"), "", "kc-ns-apply")
    assert obj is not None and obj["metadata"]["labels"] == {"tier": "two"}


def test_patch_json_merge_and_strategic(kc: KubectlEmulator) -> None:
    ns = _namespace(kc, "kc-patch")
    kc.run("apply", "-f", "-", stdin=_geip(ns))
    kc.run("patch", "globalegressip", "geip", "-n", ns, "--type", "merge", "-p", '{"spec":{"numberOfIPs":4}}')
    obj = _get(kc, GEIP, ns, "geip")
    assert obj is not None and obj["spec"]["numberOfIPs"] == 4
    patch = '[{"op":"replace","path":"/spec/numberOfIPs","value":5}]'
    kc.run("patch", "globalegressip", "geip", "-n", ns, "--type", "json", "-p", patch)
    obj = _get(kc, GEIP, ns, "geip")
    assert obj is not None and obj["spec"]["numberOfIPs"] == 5
    kc.run("create", "configmap", "conf", "-n", ns, "--from-literal=a=1")
    kc.run("patch", "configmap", "conf", "-n", ns, "-p", '{"data":{"b":"2"}}')  # strategic, kubectl's default
    cm = _get(kc, ("", "v1", "configmaps"), ns, "conf")
    assert cm is not None and cm["data"] == {"a": "1", "b": "2"}


def test_wait_for_a_condition_and_for_delete(kc: KubectlEmulator) -> None:
    ns = _namespace(kc, "kc-wait")
    kc.run("apply", "-f", "-", stdin=_geip(ns))
    waiting = kc.start("wait", "--for=condition=Allocated", "globalegressip/geip", "-n", ns, "--timeout=60s")
    time.sleep(1.0)  # let it start watching; it also sees a condition set before
    status = {"status": {"conditions": [{"type": "Allocated", "status": "True", "reason": "Success"}]}}
    kc.run("patch", "globalegressip", "geip", "-n", ns, "--subresource=status", "--type", "merge",
           "-p", json.dumps(status))  # fmt: skip
    rc, out, err = finish(waiting, 60)
    assert rc == 0, err
    assert "condition met" in out
    gone = kc.start("wait", "--for=delete", "globalegressip/geip", "-n", ns, "--timeout=60s")
    kc.run("delete", "globalegressip", "geip", "-n", ns, "--wait=false")
    rc, _, err = finish(gone, 60)
    assert rc == 0, err
    assert _get(kc, GEIP, ns, "geip") is None


def test_unmet_wait_times_out(kc: KubectlEmulator) -> None:
    ns = _namespace(kc, "kc-nowait")
    kc.run("apply", "-f", "-", stdin=_geip(ns))
    proc = kc.run("wait", "--for=condition=Allocated", "globalegressip/geip", "-n", ns, "--timeout=1s", check=False)
    assert proc.returncode != 0 and "timed out" in proc.stderr


def test_get_watch_prints_table_rows(kc: KubectlEmulator) -> None:
    ns = _namespace(kc, "kc-watch")
    kc.run("apply", "-f", "-", stdin=_geip(ns, name="first"))
    watching = kc.start("get", "globalegressips", "-n", ns, "-w")
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(line) for line in watching.stdout or ()], daemon=True)
    reader.start()

    def next_line() -> list[str]:
        try:
            return lines.get(timeout=60).split()  # a bound for a loaded machine, not a speed check
        except queue.Empty:
            watching.kill()
            raise AssertionError("kubectl get -w printed nothing more within 60 s") from None

    try:
        assert next_line()[:3] == ["NAME", "IPS", "ALLOCATED"]
        assert next_line()[:2] == ["first", "2"]
        kc.run("apply", "-f", "-", stdin=_geip(ns, name="second", spec="numberOfIPs: 7"))
        assert next_line()[:2] == ["second", "7"]  # no header again: later events carry no column definitions
    finally:
        watching.terminate()  # kubectl get -w runs until stopped: ours, by its PID
        finish(watching, 20)
