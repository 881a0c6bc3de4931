"""Independent witnesses of a lab's rolling upgrade (tests/lab/test_lab_upgrade.py): nothing here uses magw's code.

- ``Monitors``: ``ip -o monitor`` (links, addresses, routes, nexthops, neighbors, rules) and ``bridge monitor fdb``
  in every node namespace for the whole upgrade; ``deletions`` lists every object the kernel reported deleted
  (dynamic neighbor entries aside: the kernel ages those itself; a static neighbor is PERMANENT).
- ``nft_table``: the handle of our nft table and its content with every handle stripped (``nft -j``): a table
  deleted and added again gets a new handle.
- ``nexthop_ids``: the ids of the nexthop objects (``ip -j nexthop``).
- ``established_ct``: conntrack ids of the ESTABLISHED TCP entries to a port (``conntrack -L -o id``): a flush
  (or a re-created entry) gives new ids.
- ``tree_files``: every file's bytes under a directory (broker documents, WireGuard keys).
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

IP_OBJECTS = ("link", "address", "route", "nexthop", "neigh", "rule")
STOP_WAIT = 5.0


class Monitors:
    """``ip monitor`` and ``bridge monitor fdb`` in each namespace, output in ``workdir``; stopped by PID."""

    def __init__(self, namespaces: Iterable[str], workdir: Path) -> None:
        self.procs: list[tuple[str, Path, subprocess.Popen[bytes]]] = []
        workdir.mkdir(parents=True, exist_ok=True)
        for ns in namespaces:
            # stdbuf -oL: each event is written at once (a SIGTERMed ip would lose a block-buffered tail)
            for tool, argv in (("ip", ["stdbuf", "-oL", "ip", "-n", ns, "-o", "monitor", *IP_OBJECTS, "label"]),
                               ("bridge", ["stdbuf", "-oL", "bridge", "-n", ns, "monitor", "fdb"])):  # fmt: skip
                path = workdir / f"{tool}-monitor-{ns}.txt"
                with open(path, "wb") as out:
                    proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
                self.procs.append((ns, path, proc))

    def stop(self) -> None:
        for _ns, _path, proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for _ns, _path, proc in self.procs:
            try:
                proc.wait(timeout=STOP_WAIT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=STOP_WAIT)

    def deletions(self) -> dict[str, list[str]]:
        """Namespace -> the lines reporting a deleted object that existed before the monitors started: an object
        first reported added, then deleted (the route agent's capability probe makes and removes a nexthop
        and a group at start) is not a flush; nor is a dynamic neighbor or learned FDB entry the kernel aged."""
        out: dict[str, list[str]] = {}
        for ns, path, _proc in self.procs:
            added: set[str] = set()
            for line in path.read_text(errors="replace").splitlines():
                label, _, rest = line.strip().rpartition("]")
                deleted = rest.startswith("Deleted ")
                key = _object_key(label, rest.removeprefix("Deleted "))
                if not deleted:
                    added.add(key)
                    continue
                if key in added:
                    continue
                if label == "[NEIGH" and "PERMANENT" not in rest:
                    continue  # a neighbor entry the kernel learned and aged out: ours are PERMANENT
                if "bridge-monitor" in path.name and "permanent" not in rest and "static" not in rest:
                    continue  # a learned FDB entry: ours are permanent
                out.setdefault(ns, []).append(line.strip())
        return out


def _object_key(label: str, text: str) -> str:
    """What names an object in a monitor line: a nexthop its id, anything else its whole line."""
    words = text.split()
    if label == "[NEXTHOP" and len(words) >= 2 and words[0] == "id":
        return f"nexthop {words[1]}"
    return f"{label} {text.strip()}"


def _run(argv: Sequence[str]) -> str:
    return subprocess.run(list(argv), check=True, capture_output=True, text=True, timeout=30).stdout


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k != "handle"}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def nft_table(ns: str, table: str = "magw") -> tuple[int, str] | None:
    """(handle, content without handles) of ``ip table`` in ``ns``, None when there is no such table."""
    proc = subprocess.run(["ip", "netns", "exec", ns, "nft", "-j", "list", "table", "ip", table],
                          capture_output=True, text=True, timeout=30, check=False)  # fmt: skip
    if proc.returncode != 0:
        return None
    items = [i for i in json.loads(proc.stdout)["nftables"] if "metainfo" not in i]
    handle = next(int(i["table"]["handle"]) for i in items if "table" in i)
    return handle, json.dumps(_strip(items), sort_keys=True)


def nexthop_ids(ns: str) -> set[int]:
    out = _run(["ip", "-n", ns, "-j", "nexthop", "show"])
    return {int(nh["id"]) for nh in json.loads(out or "[]")}


_CT_ID = re.compile(r"\bid=(\d+)")


def established_ct(ns: str, dport: int) -> set[int]:
    """Conntrack ids of the ESTABLISHED TCP entries to ``dport`` in ``ns``."""
    proc = subprocess.run(["ip", "netns", "exec", ns, "conntrack", "-L", "-p", "tcp", "--dport", str(dport),
                           "-o", "id"], capture_output=True, text=True, timeout=30, check=False)  # fmt: skip
    ids = set()
    for line in proc.stdout.splitlines():
        m = _CT_ID.search(line)
        if m and " ESTABLISHED " in line:
            ids.add(int(m.group(1)))
    return ids


def tree_files(root: Path, *, skip: Iterable[str] = ()) -> dict[str, bytes]:
    """Relative path -> bytes of every file under ``root`` whose name does not start with one of ``skip``."""
    prefixes = tuple(skip)
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not (prefixes and p.name.startswith(prefixes))
    }
