"""The emulator's TokenReview (a static token file) and SubjectAccessReview (RBAC over the stored objects), over
HTTP on a unix socket. Expected answers are written out by hand from the RBAC rules."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from magw.kubeemu import Emulator
from magw.kubeemu.rbac import TokenFileError, parse_token_file

RBAC = "rbac.authorization.k8s.io/v1"
REF = {"apiGroup": "rbac.authorization.k8s.io"}
TOKENS = """\
# token,user,uid,groups
t-sa,system:serviceaccount:blog:app,u1
t-alice,alice,u2,"dev,ops"
"""


def _objects() -> list[dict[str, Any]]:
    return [
        {"apiVersion": RBAC, "kind": "Role", "metadata": {"name": "vip-a", "namespace": "blog"},
         "rules": [{"apiGroups": ["submariner.io"], "resources": ["egressvips"], "verbs": ["bind"],
                    "resourceNames": ["a"]}]},
        {"apiVersion": RBAC, "kind": "RoleBinding", "metadata": {"name": "app", "namespace": "blog"},
         "subjects": [{"kind": "ServiceAccount", "name": "app", "namespace": "blog"}],
         "roleRef": {**REF, "kind": "Role", "name": "vip-a"}},
        {"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": "all"},
         "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]},
        {"apiVersion": RBAC, "kind": "ClusterRoleBinding", "metadata": {"name": "ops"},
         "subjects": [{"kind": "Group", "name": "ops"}], "roleRef": {**REF, "kind": "ClusterRole", "name": "all"}},
        {"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": "read-nodes"},
         "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]},
        {"apiVersion": RBAC, "kind": "ClusterRoleBinding", "metadata": {"name": "sas-read-nodes"},
         "subjects": [{"kind": "Group", "name": "system:serviceaccounts:blog"}],
         "roleRef": {**REF, "kind": "ClusterRole", "name": "read-nodes"}},
    ]  # fmt: skip


@pytest.fixture
async def session(tmp_path: Path) -> AsyncIterator[aiohttp.ClientSession]:
    emulator = Emulator(socket_path=tmp_path / "k.sock", tokens=parse_token_file(TOKENS))
    emulator.load(_objects())
    async with emulator, aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=str(tmp_path / "k.sock"))) as s:
        yield s


async def _review(session: aiohttp.ClientSession, path: str, spec: dict[str, Any]) -> dict[str, Any]:
    async with session.post(f"http://kube{path}", json={"spec": spec}) as r:
        assert r.status == 201
        status: dict[str, Any] = (await r.json())["status"]
        return status


async def test_token_review(session: aiohttp.ClientSession) -> None:
    path = "/apis/authentication.k8s.io/v1/tokenreviews"
    sa = await _review(session, path, {"token": "t-sa"})
    assert sa["authenticated"] is True
    assert sa["user"] == {
        "username": "system:serviceaccount:blog:app",
        "uid": "u1",
        "groups": ["system:authenticated", "system:serviceaccounts", "system:serviceaccounts:blog"],
    }
    alice = await _review(session, path, {"token": "t-alice"})
    assert alice["user"]["groups"] == ["dev", "ops", "system:authenticated"]
    for bad in ("nope", "", "t-sa "):
        assert (await _review(session, path, {"token": bad}))["authenticated"] is False


@pytest.mark.parametrize(
    ("user", "groups", "attrs", "allowed"),
    [
        ("system:serviceaccount:blog:app", [], {"namespace": "blog", "verb": "bind", "name": "a"}, True),
        ("system:serviceaccount:blog:app", [], {"namespace": "blog", "verb": "bind", "name": "b"}, False),
        ("system:serviceaccount:blog:app", [], {"namespace": "blog", "verb": "unbind", "name": "a"}, False),
        ("system:serviceaccount:blog:app", [], {"namespace": "shop", "verb": "bind", "name": "a"}, False),
        ("system:serviceaccount:shop:app", [], {"namespace": "blog", "verb": "bind", "name": "a"}, False),
        ("alice", ["ops"], {"namespace": "shop", "verb": "unbind", "name": "z"}, True),
        ("alice", ["dev"], {"namespace": "shop", "verb": "unbind", "name": "z"}, False),
    ],
)
async def test_subject_access_review(
    session: aiohttp.ClientSession, user: str, groups: list[str], attrs: dict[str, str], allowed: bool
) -> None:
    spec = {"user": user, "groups": groups,
            "resourceAttributes": {"group": "submariner.io", "resource": "egressvips", **attrs}}  # fmt: skip
    status = await _review(session, "/apis/authorization.k8s.io/v1/subjectaccessreviews", spec)
    assert status["allowed"] is allowed


async def test_a_service_accounts_namespace_group_is_a_subject(session: aiohttp.ClientSession) -> None:
    spec = {"user": "system:serviceaccount:blog:other", "groups": ["system:serviceaccounts:blog"],
            "resourceAttributes": {"group": "", "resource": "nodes", "verb": "get", "name": "n1"}}  # fmt: skip
    assert (await _review(session, "/apis/authorization.k8s.io/v1/subjectaccessreviews", spec))["allowed"] is True
    spec["resourceAttributes"]["verb"] = "list"
    assert (await _review(session, "/apis/authorization.k8s.io/v1/subjectaccessreviews", spec))["allowed"] is False


def test_a_token_file_line_without_a_user_is_refused() -> None:
    with pytest.raises(TokenFileError, match="line 2"):
        parse_token_file("t,u,1\nlonely\n")
