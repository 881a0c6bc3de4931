"""``python -m magw.kubeemu``: run the API server emulator until SIGTERM (tests and the lab; NOT for production).

    python -m magw.kubeemu --socket /run/magw/east.sock [--crd deploy/crds/x.yaml ...] [--bookmark-interval 5]
    python -m magw.kubeemu --listen 10.0.0.1:6443 --pidfile /run/magw/east.pid --state seed.yaml
    python -m magw.kubeemu --socket /run/magw/east.sock --listen 127.0.0.1:6443   # both (the lab: kubectl)

``--state FILE`` loads objects at start (YAML or JSON: documents that are objects, lists of objects, or
``kind: List`` with ``items``), status included. ``--persist FILE`` keeps the state in FILE across restarts
(``magw.kubeemu.persist``; when FILE exists it is loaded instead of ``--state``). The pidfile is written once the
server listens (a caller can wait for it) and removed on exit. One line on stderr says where it serves.

Faults from outside (the lab's soak): SIGUSR1 compacts the history and drops every watch (each client's next
watch from its last version gets 410 Expired: a "410 storm"); SIGUSR2 only drops every watch. Each prints a line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml

from magw.kubeemu import serviceips
from magw.kubeemu.errors import ApiError
from magw.kubeemu.persist import Persister
from magw.kubeemu.rbac import parse_token_file
from magw.kubeemu.resources import CrdError
from magw.kubeemu.server import Emulator


def _documents(path: str) -> Iterator[Any]:
    with open(path, encoding="utf-8") as f:
        yield from (doc for doc in yaml.safe_load_all(f) if doc is not None)


def _objects(path: str) -> Iterator[dict[str, Any]]:
    for doc in _documents(path):
        if isinstance(doc, list):
            yield from doc
        elif isinstance(doc, dict) and doc.get("kind") == "List":
            yield from doc.get("items") or ()
        elif isinstance(doc, dict):
            yield doc
        else:
            raise ValueError(f"{path}: a document is neither an object nor a list of objects")


def _listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"--listen wants HOST:PORT, got {value!r}")
    return host.strip("[]"), int(port)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m magw.kubeemu", description=__doc__.split("\n")[0])
    p.add_argument("--socket", help="serve on this unix socket path")
    p.add_argument("--listen", type=_listen, help="serve on HOST:PORT (inside a lab network namespace); with "
                   "--socket, on both")  # fmt: skip
    p.add_argument("--crd", action="append", default=[], help="also serve the kinds of this CRD manifest (repeatable)")
    p.add_argument("--bookmark-interval", type=float, default=60.0, help="seconds between watch bookmarks")
    p.add_argument("--service-ip-range", type=serviceips.parse_range,
                   help="give a Service created without a clusterIP the first free address of this CIDR")
    p.add_argument("--pod-logs", help="serve pods' logs from the files a lab kubelet writes in this directory")
    p.add_argument("--pidfile", help="write the PID here once serving; removed on exit")
    p.add_argument("--state", help="objects to load at start (YAML/JSON)")
    p.add_argument("--persist", help="keep the state in this file across restarts (loaded at start if it exists)")
    p.add_argument("--token-auth-file", help="serve TokenReview for these tokens (token,user,uid,\"g1,g2\" lines) and "
                   "SubjectAccessReview over the stored RBAC objects")  # fmt: skip
    args = p.parse_args(argv)
    if args.socket is None and args.listen is None:
        p.error("give --socket, --listen or both")
    return args


async def serve(args: argparse.Namespace) -> None:
    tokens = None
    if args.token_auth_file:
        with open(args.token_auth_file, encoding="utf-8") as f:
            tokens = parse_token_file(f.read())
    host, port = args.listen or (None, 0)
    emulator = Emulator(
        socket_path=args.socket, host=host, port=port, bookmark_interval=args.bookmark_interval, tokens=tokens,
        pod_logs=args.pod_logs, service_ips=args.service_ip_range,
    )
    for path in args.crd:
        for doc in _documents(path):
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                emulator.add_crd(doc)
    persister = Persister(emulator.store, Path(args.persist)) if args.persist else None
    restored = persister.restore() if persister is not None else 0
    if args.state and not (persister is not None and persister.path.exists()):
        emulator.load(_objects(args.state))
    if persister is not None:
        persister.start()
        print(f"kubeemu: state kept in {persister.path} ({restored} objects restored)", file=sys.stderr, flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGUSR1, _storm, emulator)
    loop.add_signal_handler(signal.SIGUSR2, _drop, emulator)
    await emulator.start()
    try:
        if args.pidfile:
            Path(args.pidfile).write_text(f"{os.getpid()}\n", encoding="utf-8")
        where = " and ".join(dict.fromkeys(u for u in (emulator.url, emulator.tcp_url) if u))
        print(f"kubeemu: serving on {where} (an emulator for tests and the lab)", file=sys.stderr, flush=True)
        await stop.wait()
    finally:
        await emulator.stop()
        if args.pidfile:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(args.pidfile)


def _storm(emulator: Emulator) -> None:
    rv = emulator.compact()
    dropped = emulator.drop_watches()
    print(f"kubeemu: SIGUSR1: history compacted at {rv}, {dropped} watches dropped", file=sys.stderr, flush=True)


def _drop(emulator: Emulator) -> None:
    print(f"kubeemu: SIGUSR2: {emulator.drop_watches()} watches dropped", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        asyncio.run(serve(args))
    except (OSError, ValueError, CrdError, ApiError, yaml.YAMLError) as err:
        print(f"kubeemu: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
