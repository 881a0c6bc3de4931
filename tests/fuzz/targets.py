"""The fuzz targets: each takes raw bytes (what a file, the API server or the kernel could hand magw) and feeds
them to one parser of outside input.

The rule every target checks (docs/fuzzing.md): the parser either returns, or raises its documented error type
whose message is one line (no newline, not empty) naming where the input came from (the file, the object or
the netlink message type). Any other exception (TypeError, KeyError, struct.error, RecursionError, ...) escapes
the target and is a crash: atheris (``benchmarks/fuzz.py``) reports it, the replay tests fail on it.

Imports of magw happen inside the functions' module import, so ``benchmarks/fuzz.py`` can import this module
under ``atheris.instrument_imports()`` and get magw's code instrumented for coverage.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from magw.drivers.netlink.neighdump import AF_BRIDGE, RTM_NEWNEIGH, parse_entries
from magw.drivers.netlink.nexthop import decode_nexthop
from magw.drivers.netlink.nlattr import iter_messages, parse_error
from magw.drivers.netlink.routes import parse_nexthop, parse_route
from magw.drivers.nft.codec import ListingError, parse_table
from magw.drivers.nft.elements import ElementError
from magw.drivers.wireguard.tool import WgError, parse_dump
from magw.lab.errors import LabInputError
from magw.lab.spec.topology import parse_topology_text
from magw.snapshot.load import SnapshotError, parse_snapshot_text
from magw.sources.file.assemble import assemble
from magw.sources.file.documents import Document, DocumentError, parse_file
from magw.sources.kube import mapping

ROOT = Path(__file__).resolve().parents[2]
CORPORA = ROOT / "tests" / "data" / "fuzz"
BROKER_EXAMPLE = ROOT / "examples" / "broker"

Target = Callable[[bytes], None]


class RuleBroken(AssertionError):
    """The parser raised its documented error, but not as one line naming the input's origin."""


def one_line(exc: BaseException, origin: str) -> None:
    """The one-line rule: the message is not empty, has no newline and names ``origin``."""
    text = str(exc)
    if not text or "\n" in text or "\r" in text or origin not in text:
        raise RuleBroken(f"{type(exc).__name__} breaks the one-line rule (must name {origin!r}): {text!r}")


def _text(data: bytes) -> str | None:
    """The UTF-8 text of ``data``; None when it is not UTF-8 (each reader refuses those bytes before parsing:
    tests/fuzz/test_fuzz_regressions.py shows it for every file reader)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


# ---- YAML files --------------------------------------------------------------------------------------------


def snapshot_yaml(data: bytes) -> None:
    """A snapshot file (``magw plan/apply --snapshot``, the daemons' ``--snapshot``)."""
    text = _text(data)
    if text is None:
        return
    try:
        parse_snapshot_text(text, source="fuzz.yaml")
    except SnapshotError as exc:
        one_line(exc, "fuzz.yaml")


def _example_docs() -> list[Document]:
    docs: list[Document] = []
    for path in sorted(BROKER_EXAMPLE.glob("*.yaml")):
        docs.extend(parse_file(path.read_text(), file=path.name))
    return docs


_EXAMPLE: list[Document] = _example_docs()


def _assemble_with_example(docs: tuple[Document, ...]) -> None:
    """The broker's assembly of the example broker plus ``docs``: never raises, every problem is one line."""
    for local in ("east", "west"):
        assembly = assemble(local, [*_EXAMPLE, *docs], {})
        for problem in assembly.problems:
            one_line(ValueError(problem.error), problem.file)


def broker_file(data: bytes) -> None:
    """One file of a FileBroker directory (every document kind: Cluster, Node, Endpoint, Config, Health, the
    Globalnet and egress kinds, Lease), then the assembly of the example broker with it."""
    text = _text(data)
    if text is None:
        return
    try:
        docs = parse_file(text, file="fuzz.yaml")
    except DocumentError as exc:
        one_line(exc, "fuzz.yaml")
        return
    _assemble_with_example(docs)


def lab_topology(data: bytes) -> None:
    """A lab topology file (``magw lab up --topology``)."""
    text = _text(data)
    if text is None:
        return
    try:
        parse_topology_text(text, source="fuzz.yaml")
    except LabInputError as exc:
        one_line(exc, "fuzz.yaml")


# ---- Kubernetes objects (JSON, as the API server sends them) -----------------------------------------------

KINDS: dict[str, Callable[[dict[str, Any]], tuple[Document, ...]]] = {
    "Node": lambda o: mapping.node_docs(o, "east"),
    "Cluster": mapping.cluster_docs,
    "Endpoint": mapping.endpoint_docs,
    "Namespace": lambda o: mapping.namespace_docs(o, "east"),
    "Pod": lambda o: mapping.pod_docs(o, "east"),
    "Service": lambda o: mapping.service_docs(o, "east", o.get("slices") if isinstance(o.get("slices"), list) else ()),
    "ServiceExport": lambda o: mapping.service_export_docs(o, "east"),
    "GlobalEgressIP": lambda o: mapping.globalnet_docs("GlobalEgressIP", o, "east"),
    "ClusterGlobalEgressIP": lambda o: mapping.globalnet_docs("ClusterGlobalEgressIP", o, "east"),
    "GlobalIngressIP": lambda o: mapping.globalnet_docs("GlobalIngressIP", o, "east"),
    "EgressVIP": lambda o: mapping.egress_vip_docs(o, "east"),
    "EgressConfig": lambda o: mapping.egress_config_docs(o, "east"),
    "Submariner": lambda o: mapping.config_docs(o, None),
    "ConfigMap": lambda o: mapping.config_docs(None, o),
}


def map_object(obj: dict[str, Any]) -> None:
    """One Kubernetes object (a dict, as the API server's JSON decodes) mapped to documents, then assembled."""
    kind = obj.get("kind")
    if not isinstance(kind, str) or kind not in KINDS:
        return
    try:
        docs = KINDS[kind](obj)
    except mapping.MappingError as exc:
        one_line(exc, "kube:")
        return
    _assemble_with_example(docs)


def kube_object(data: bytes) -> None:
    """A Kubernetes object's JSON (what a watch event carries) with any fields."""
    text = _text(data)
    if text is None:
        return
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        return  # the client library's JSON decoder, not ours
    if isinstance(obj, dict) and isinstance(obj.get("metadata"), dict):
        map_object(obj)


# ---- kernel dumps ----------------------------------------------------------------------------------------


def _ifname(index: int) -> str:
    return f"if{index}"


def netlink_nexthop(data: bytes) -> None:
    """An RTM_NEWNEXTHOP message of a dump: our own decoder (``decode_nexthop``) and the driver's mapping."""
    for decode in (decode_nexthop, lambda m: parse_nexthop(m, _ifname)):
        try:
            decode(data)
        except ValueError as exc:
            one_line(exc, "RTM_NEWNEXTHOP")


def netlink_dump(data: bytes) -> None:
    """A buffer of netlink dump replies: the framing and the NLMSG_ERROR reader of the raw socket, then each
    message through the route, nexthop and neighbour readers."""
    for kind, flags, _seq, offset, length in iter_messages(data, len(data)):
        msg = data[offset : offset + length]
        if kind == 2:  # NLMSG_ERROR
            parse_error(data, offset, length, flags)
            continue
        for name, decode in (
            ("RTM_NEWROUTE", lambda m: parse_route(m, _ifname)),
            ("RTM_NEWNEXTHOP", lambda m: parse_nexthop(m, _ifname)),
        ):
            try:
                decode(msg)
            except ValueError as exc:
                one_line(exc, name)
        if kind == RTM_NEWNEIGH:
            list(parse_entries([msg], socket.AF_INET, 1))
            list(parse_entries([msg], AF_BRIDGE, 1))


def nft_json(data: bytes) -> None:
    """``nft -j list table`` output, as the nft driver observes a table."""
    text = _text(data)
    if text is None:
        return
    try:
        doc = json.loads(text) if text.strip() else {}
    except (ValueError, RecursionError):
        return  # the JSON decoder's refusal; the driver reads libnftables' own output
    try:
        parse_table(doc, "ip", "magw")
    except (ListingError, ElementError) as exc:
        one_line(exc, "nft")


def wg_dump(data: bytes) -> None:
    """``wg show DEV dump`` output (the WireGuard cable driver's observe)."""
    text = _text(data)
    if text is None:
        return
    try:
        parse_dump(text)
    except WgError as exc:
        one_line(exc, "wg")


TARGETS: dict[str, Target] = {
    "snapshot_yaml": snapshot_yaml,
    "broker_file": broker_file,
    "lab_topology": lab_topology,
    "kube_object": kube_object,
    "netlink_nexthop": netlink_nexthop,
    "netlink_dump": netlink_dump,
    "nft_json": nft_json,
    "wg_dump": wg_dump,
}

def corpus(name: str) -> list[bytes]:
    """The seed inputs of target ``name`` (``tests/data/fuzz/<name>/``), sorted by file name."""
    return [p.read_bytes() for p in sorted((CORPORA / name).iterdir()) if p.is_file()]
