"""docs/daemons.md, "Running by hand": the example broker directory and the recipe work as written.

The recipe's shell blocks sit between ``<!-- recipe:start -->`` and
``<!-- recipe:end -->``. The kernel test pastes them, in order, into ONE bash
session (as a reader would), with exactly one substitution: the namespace name
``byhand-e-w1`` becomes a unique throwaway name. ``mktemp`` makes the work
directory under the test's tmp_path (TMPDIR). Everything the session started is
in its own process group, which the test ends if the recipe fails half-way.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import signal
import subprocess
import time
import uuid
from ipaddress import IPv4Address
from pathlib import Path
from typing import Any

import pytest
import yaml

from magw.model import Endpoint
from magw.sources.file.endpoint_files import render_endpoint
from tests.support.netns import ip_json
from tests.support.paths import REPO

DOC = REPO / "docs" / "daemons.md"
EXAMPLES = REPO / "examples" / "broker"
BLOCK = re.compile(r"<!-- recipe:start -->\n```sh\n(.*?)```\n<!-- recipe:end -->", re.S)
NS_LINE = "NS=byhand-e-w1\n"  # the recipe's one namespace name: the only thing the test replaces
REMOTE = ["10.2.0.0/16", "100.2.0.0/16"]  # west's pod and service CIDRs (examples/broker/clusterset.yaml)
BLOCK_TIMEOUT = 60.0


def recipe_blocks() -> list[str]:
    """The recipe's shell blocks, in document order."""
    return BLOCK.findall(DOC.read_text(encoding="utf-8"))


def test_the_recipe_has_its_four_blocks_and_names_one_namespace() -> None:
    """Start, look, stop, and the no-root line; the namespace name is set once, in the start block."""
    blocks = recipe_blocks()
    assert len(blocks) == 4
    assert [b.count(NS_LINE) for b in blocks] == [1, 0, 0, 0]
    assert "byhand-e-w1" not in "".join(blocks).replace(NS_LINE, "")


def test_example_endpoint_files_are_what_the_gateway_writes_under_its_name() -> None:
    """Each example Endpoint file is named ``endpoint-<cluster>@<hostname>.yaml`` and holds exactly what
    magw-gateway writes, so a gateway daemon started on the directory takes it over (no second document)."""
    found = {}
    for path in sorted(EXAMPLES.glob("*.yaml")):
        docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
        endpoints = [d for d in docs if d.get("kind") == "Endpoint"]
        if not endpoints:
            continue
        assert len(docs) == 1, path.name
        doc = endpoints[0]
        endpoint = Endpoint(
            cluster=doc["cluster"],
            hostname=doc["hostname"],
            private_ip=IPv4Address(doc["private_ip"]),
            public_ip=IPv4Address(doc["public_ip"]),
        )
        found[path.name] = path.read_text(encoding="utf-8") == render_endpoint(endpoint)
    assert found == {
        "endpoint-east@e-gw1.yaml": True,
        "endpoint-east@e-gw2.yaml": True,
        "endpoint-west@w-gw1.yaml": True,
    }


class _Shell:
    """One bash session fed block by block on stdin; ``set -eu`` makes a failing command end it."""

    def __init__(self, cwd: Path, tmp: Path) -> None:
        self._stderr = tmp / "bash.stderr"
        self.proc = subprocess.Popen(
            ["bash", "-s"],
            cwd=cwd,
            env={**os.environ, "TMPDIR": str(tmp)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr.open("w"),
            start_new_session=True,  # its own process group: the daemons it starts stay in it
        )
        self._buffer = b""
        self._feed("set -eu\n")

    def _feed(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text.encode())
        self.proc.stdin.flush()

    def run(self, block: str) -> str:
        """Run ``block``; its stdout. Fails with bash's stderr if the session ends or hangs."""
        marker = f"@@block-done-{uuid.uuid4().hex}@@"
        self._feed(f"{block}\necho {marker}\n")
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + BLOCK_TIMEOUT
        while marker.encode() not in self._buffer:
            ready, _, _ = select.select([fd], [], [], 0.2)
            chunk = os.read(fd, 65536) if ready else b""
            self._buffer += chunk
            if (ready and not chunk) or self.proc.poll() is not None or time.monotonic() > deadline:
                if marker.encode() in self._buffer:
                    break
                pytest.fail(f"recipe block failed or hung:\n{block}\nbash stderr: {self._stderr.read_text()}")
        out, _, self._buffer = self._buffer.partition(marker.encode() + b"\n")
        return out.decode()

    def close(self) -> None:
        """End the session; whatever it started and left running goes with its process group."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.proc.pid, sig)  # the group of the bash we started
            except ProcessLookupError:
                break
            time.sleep(0.5)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=5)


def _remote_routes(ns: str) -> dict[str, dict[str, Any]]:
    return {r["dst"]: r for r in ip_json(ns, "route", "show") if r.get("dst") in REMOTE}


@pytest.mark.kernel
def test_running_by_hand_keeps_the_routes_past_the_endpoint_ttl(tmp_path: Path) -> None:
    """The recipe as written: after more than the default endpoint TTL (5 s) the worker still routes west's
    CIDRs through a nexthop group (not expired, not unreachable) and says converged; stop removes everything."""
    start, look, stop, fake = recipe_blocks()
    ns = f"magwt-byhand-{uuid.uuid4().hex[:8]}"
    start = start.replace(NS_LINE, f"NS={ns}\n")
    shell = _Shell(REPO, tmp_path)
    try:
        shell.run(start)
        looked = shell.run(look)  # sleeps past the TTL first
        routes = _remote_routes(ns)
        groups = {n["id"]: n for n in ip_json(ns, "nexthop", "show") if "group" in n}
        (status_file,) = tmp_path.glob("tmp.*/e-w1.status.json")
        status = json.loads(status_file.read_text())
        paths = {
            dst: (r.get("type", "unicast"), len(groups.get(r.get("nhid"), {}).get("group", ())))
            for dst, r in routes.items()
        }
        assert paths == {dst: ("unicast", 2) for dst in REMOTE}  # via the group of e-gw1 and e-gw2
        assert (status["converged"], status["waiting"], "10.2.0.0/16 nhid" in looked) == (True, None, True)
        shell.run(stop)
        shell.run(fake)
        assert (os.path.exists(f"/var/run/netns/{ns}"), list(tmp_path.glob("tmp.*"))) == (False, [])
    finally:
        shell.close()
        subprocess.run(["ip", "netns", "del", ns], check=False, capture_output=True, timeout=30)
