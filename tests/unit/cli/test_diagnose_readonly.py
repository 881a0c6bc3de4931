"""``magw diagnose kernel`` creates no probe objects in a namespace that may be the host's."""

from __future__ import annotations

import argparse

import pytest

from magw.cli import diagnose
from magw.drivers.netlink import capabilities


def _run(monkeypatch: pytest.MonkeyPatch, *, refusal: str | None) -> list[bool]:
    seen: list[bool] = []

    def fake_detect(netns: str | None, *, read_only: bool = False) -> object:
        seen.append(read_only)
        raise SystemExit(0)

    monkeypatch.setattr(diagnose, "detect", fake_detect)
    monkeypatch.setattr(diagnose, "current_netns_refusal", lambda doing, **kw: refusal)
    with pytest.raises(SystemExit):
        diagnose.run(argparse.Namespace(netns=None, json=False))
    return seen


def test_diagnose_reads_only_in_a_namespace_that_may_be_the_hosts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without --netns, in the host's (or an undecidable) namespace, detection runs read-only: no probe nexthops."""
    assert _run(monkeypatch, refusal="refusing to probe the host's initial network namespace") == [True]


def test_diagnose_probes_in_a_namespace_known_not_to_be_the_hosts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Known to be another namespace: the probe objects (the full answer) are still used."""
    assert _run(monkeypatch, refusal=None) == [False]


def test_detect_read_only_never_calls_the_writing_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    """detect(read_only=True) goes through the dump-only inspection, never the object-creating probe."""

    def boom(netns: str | None) -> object:
        raise AssertionError("probe_nexthops creates objects")

    monkeypatch.setattr(capabilities, "probe_nexthops", boom)
    capabilities.detect(None, read_only=True)
