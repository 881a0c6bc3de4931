"""The whole gather from its options: which sources, into which tarball (``magw gather``, docs/gather.md)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs

from magw import __version__
from magw.ops.gather.archive import Archive
from magw.ops.gather.diagnose import build_note, diagnose_node
from magw.ops.gather.kube import collect_kube
from magw.ops.gather.lab import collect_lab
from magw.ops.gather.node import collect_node, wireguard_go_pid
from magw.ops.gather.runner import DEFAULT_TIMEOUT, Runner, run
from magw.ops.gather.versions import collect_versions

FORMAT = 1


@attrs.frozen(kw_only=True)
class Options:
    """What to gather. ``lab``; or a node (``node``: True, ``netns`` None for the current namespace) and/or a
    cluster (``kubeconfig``)."""

    output: Path
    lab: str | None = None
    node: bool = False
    netns: str | None = None
    state_dir: Path | None = None  # the node's daemons' --state-dir (wireguard-go's pid file and log)
    files: tuple[Path, ...] = ()  # more files of the node (its daemons' logs, status files)
    kubeconfig: str | None = None
    namespace: str = "submariner-operator"
    diagnose: bool = True
    timeout: float = DEFAULT_TIMEOUT
    argv: tuple[str, ...] = ()  # the command line, for the MANIFEST


def default_output(now: datetime | None = None) -> Path:
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    return Path(f"magw-gather-{stamp}.tar.gz")


def top_dir(output: Path) -> str:
    name = output.name
    for suffix in (".tar.gz", ".tgz"):
        if name.endswith(suffix):
            return name[: -len(suffix)] or "magw-gather"
    return name or "magw-gather"


def _mode(opts: Options) -> str:
    return "lab" if opts.lab else "+".join(m for m, on in (("node", opts.node), ("kube", opts.kubeconfig)) if on)


def _node(archive: Archive, opts: Options) -> None:
    wg = archive.runner(("ip", *(("-n", opts.netns) if opts.netns else ()), "link", "show", "dev", "magw-wg"), 5.0)
    collect_node(archive, "node", opts.netns, wireguard=wg.code == 0, state_dir=opts.state_dir)
    if opts.state_dir is not None:
        log = opts.state_dir / "wireguard" / "wireguard-go.log"
        if log.is_file():
            archive.copy_file("node/files/wireguard-go.log", log)
        if wg.code == 0 and wireguard_go_pid(opts.state_dir) is None:
            archive.fail("node/wg-show.txt", str(opts.state_dir), "no running wireguard-go recorded in --state-dir")
    for i, path in enumerate(opts.files):
        archive.copy_file(f"node/files/{i:02d}-{path.name}", path)
    if opts.diagnose:
        diagnose_node(archive, "diagnose/node.json", opts.netns)
        archive.add_text("diagnose/BUILD.txt", build_note() + "\n", source="magw (the build that ran diagnose)")


def gather(opts: Options, *, runner: Runner = run) -> dict[str, Any]:
    """Write the tarball; its MANIFEST. ``NoLab`` and ``KubeConfigError`` come out before anything is kept."""
    archive = Archive(opts.output, top_dir(opts.output), runner=runner, timeout=opts.timeout)
    try:
        if opts.lab is not None:
            st = collect_lab(archive, opts.lab, diagnose=opts.diagnose)
            target = f"lab {opts.lab} ({st.phase}, control plane {st.control_plane}, cni {st.cni}, "
            target += f"cable {st.topology.cable.value})"
        else:
            parts = []
            if opts.kubeconfig is not None:
                collect_kube(archive, "kube/cluster", opts.kubeconfig, opts.namespace)
                parts.append(f"cluster of {opts.kubeconfig} (namespace {opts.namespace})")
            if opts.node:
                _node(archive, opts)
                parts.append(f"node in {'netns ' + opts.netns if opts.netns else 'the current namespace'}")
            target = " and ".join(parts)
        collect_versions(archive)
    except BaseException:
        archive.abort()
        raise
    head = {"format": FORMAT, "magw": __version__, "mode": _mode(opts), "target": target,
            "command": list(opts.argv) or [sys.argv[0]]}  # fmt: skip
    return archive.close(head)


def summary_lines(manifest: dict[str, Any], output: Path) -> list[str]:
    """What the CLI prints: the tarball, its size in files, the failures one per line."""
    files, failed = manifest["files"], manifest["failed"]
    lines = [f"wrote {output}: {len(files) + 1} files ({manifest['target']}), {len(failed)} failed, "
             f"{manifest['redactions']} values redacted"]  # fmt: skip
    lines += [f"  failed: {f['what']}: {f['error']}" for f in failed]
    return lines


def member_listing(manifest: dict[str, Any]) -> Sequence[str]:
    return [f"{f['path']:<44} {f['bytes']:>8}  {f['source']}" for f in manifest["files"]]
