"""``magw gather --kubeconfig``: magw's objects with their statuses from an API server (our emulator, on a unix
socket), and no credential: not the kubeconfig's token or client key, not a secret field of an object."""

from __future__ import annotations

import asyncio
import json
import secrets
import tarfile
from pathlib import Path
from typing import Any

import yaml

from magw.ops.gather.kube import kinds
from magw.ops.gather.run import Options, gather
from tests.support import kube_objects
from tests.support.kubeemu_fixtures import NAMESPACE, running_emulator


def tar_members(path: Path) -> dict[str, bytes]:
    with tarfile.open(path, "r:gz") as tar:
        out = {}
        for info in tar.getmembers():
            f = tar.extractfile(info)
            assert f is not None
            out[info.name.split("/", 1)[1]] = f.read()
        return out


def with_credentials(kubeconfig: Path, token: str, key_data: str) -> Path:
    """A copy of ``kubeconfig`` whose user holds a bearer token and a client key (as a real one does)."""
    doc: dict[str, Any] = yaml.safe_load(kubeconfig.read_text())
    doc["users"][0]["user"] = {"token": token, "client-key-data": key_data}
    out = kubeconfig.with_name("with-credentials.kubeconfig")
    out.write_text(yaml.safe_dump(doc))
    return out


async def test_cluster_objects_without_any_credential(tmp_path: Path) -> None:
    """Every kind gathered is listed from the server (the Endpoints and the Submariner object come back as they
    were created), the kubeconfig is summarised with the kinds of credential only, and neither the kubeconfig's
    token and client key nor the Submariner object's ``ceIPSecPSK`` and broker token appear in any member."""
    token, key_data = secrets.token_hex(24), secrets.token_urlsafe(48)
    psk, broker_token = secrets.token_hex(16), secrets.token_hex(20)
    submariner = kube_objects.submariner(True)
    submariner["spec"] |= {"ceIPSecPSK": psk, "brokerK8sApiServerToken": broker_token}
    objects = [submariner, *[o for o in kube_objects.east() if o["kind"] != "Submariner"]]
    async with running_emulator() as env:
        env.emulator.load(objects)
        kubeconfig = with_credentials(env.kubeconfig, token, key_data)
        out = tmp_path / "k.tar.gz"
        opts = Options(output=out, kubeconfig=str(kubeconfig), namespace=NAMESPACE, diagnose=False, timeout=10.0)
        manifest = await asyncio.to_thread(gather, opts)
    got = tar_members(out)
    for member, data in got.items():
        for secret in (token, key_data, psk, broker_token):
            assert secret.encode() not in data, f"{member} holds a secret"
    assert manifest["failed"] == []
    assert manifest["mode"] == "kube"
    listed = {f["path"] for f in manifest["files"] if f["path"].startswith("kube/cluster/")}
    assert listed == {"kube/cluster/kubeconfig.json"} | {f"kube/cluster/{k.kind}.json" for k in kinds(NAMESPACE)}
    endpoints = json.loads(got["kube/cluster/Endpoint.json"])
    assert sorted(e["spec"]["hostname"] for e in endpoints) == ["e-gw1", "e-gw2", "w-gw1"]
    (sub,) = json.loads(got["kube/cluster/Submariner.json"])
    assert sub["spec"] == {"multiActiveGatewayEnabled": True, "ceIPSecPSK": "REDACTED",
                           "brokerK8sApiServerToken": "REDACTED"}  # fmt: skip
    summary = json.loads(got["kube/cluster/kubeconfig.json"])
    assert summary["users"] == [{"name": "magw", "credentials": ["client-key-data", "token"]}]
    assert json.loads(got["MANIFEST.json"]) == manifest
