"""A VIP status's ``conflicts`` goes everywhere the status goes: the file broker's document and back, the
CR's status (admitted by the CRD; empty: absent, as before) and back through the Kubernetes mapping."""

from __future__ import annotations

from typing import Any

import pytest

from magw.model.egressgw import EgressVIPStatus
from magw.snapshot.egressgw import status, status_to_doc
from magw.sources.kube import mapping
from magw.sources.kube.egressgw_store import status_body
from tests.support.deploy_checks import cr_errors, manifests

CLASH = "8080/tcp of blog/web is already blog/feed's; ignored"
WITH = EgressVIPStatus(holder="e-gw1", since="2025-01-01T00:00:00.000000Z", services=("blog/feed",), conflicts=(CLASH,))


def test_the_broker_document_carries_conflicts_and_only_when_there_are_any() -> None:
    """status_to_doc -> status is the identity; a status without conflicts has no such key (documents as before)."""
    doc = status_to_doc("web", WITH)
    assert doc["conflicts"] == [CLASH]
    assert status(doc, "s") == ("web", WITH)
    assert "conflicts" not in status_to_doc("web", EgressVIPStatus())


def _cr(body: dict[str, Any]) -> dict[str, Any]:
    (cr,) = [m.doc for m in manifests("examples") if m.kind == "EgressVIP"]
    return {**cr, "status": {k: v for k, v in body.items() if v is not None}}  # nulls pruned, as the API server does


@pytest.mark.parametrize("st", [WITH, EgressVIPStatus()], ids=["conflicts", "none"])
def test_the_crd_admits_the_status_and_the_mapping_reads_it_back(st: EgressVIPStatus) -> None:
    """The controller's merge patch passes the CRD; the CR maps back to the same status document."""
    cr = _cr(status_body(st))
    assert cr_errors(cr) == []
    docs = mapping.egress_vip_docs(cr, "east")
    (read,) = [d for d in docs if d.kind == "EgressVIPStatus"]
    fields = {k: v for k, v in read.fields.items() if k != "cluster"}
    assert status(fields, "s")[1] == st
