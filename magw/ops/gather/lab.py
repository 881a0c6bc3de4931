"""A whole lab into the tarball: its files, its statuses as its own commands print them, its control plane's
objects, its OVN rows, and every node's kernel (``magw.ops.gather.node``).

Files of the lab's directory (``/run/magw-lab/<name>``) are taken by what they are, never by "everything":
``state.json``; ``status/*.json`` (the route agents' and OVN syncers' status files); the file broker's documents
(``broker/``: Endpoints, Gateways, Globalnet and egress statuses); every ``*.log`` (the daemons', the emulators',
OVN's servers', wireguard-go's, keepalived's) and the egress agents' ``*.conf``. Never a private key
(``state/<node>/wireguard/private.key``) and never a kubeconfig (each is summarised by ``magw.ops.gather.kube``).
A lab that is not up (building, failed) is gathered all the same: that is when a report is needed.
"""

from __future__ import annotations

from pathlib import Path

from magw.desired.ovn.rows import OWNER, OWNER_KEY
from magw.lab.build import state
from magw.lab.build.state import LabState
from magw.lab.planes import kube as lab_kube
from magw.lab.planes.daemons import node_state_dir
from magw.lab.planes.ovn import ovn_dir
from magw.lab.spec.layout import layout
from magw.model.cable import Cable
from magw.ops.gather.archive import Archive
from magw.ops.gather.diagnose import build_note, diagnose_node, lab_forms, magw_argv, run_diagnose
from magw.ops.gather.kube import collect_kube
from magw.ops.gather.node import collect_node

# magw's NB tables (magw.drivers.ovn.nbdriver) and the mark every row we write carries (magw.desired.ovn.rows)
OVN_TABLES = ("Logical_Router", "Logical_Router_Port", "Logical_Router_Static_Route", "Logical_Router_Policy",
              "Logical_Switch", "Logical_Switch_Port", "Address_Set")  # fmt: skip
COPIED_SUFFIXES = (".log", ".conf")
SKIPPED_DIRS = ("kube",)  # kubeconfigs and sockets: summarised through the API instead


class NoLab(LookupError):
    """No lab of that name; ``str()`` is one line naming the labs there are."""


def read_state(name: str) -> LabState:
    try:
        return state.require(name)
    except state.UnknownLab as exc:
        raise NoLab(f"--lab: {exc}") from None


def lab_files(st: LabState) -> list[tuple[str, Path]]:
    """(member, path) of every file of the lab's directory gathered (see the module's docstring), sorted."""
    root = st.dir
    out: list[tuple[str, Path]] = []
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.is_symlink():
            continue
        rel = path.relative_to(root)
        top = rel.parts[0]
        if top in SKIPPED_DIRS:
            continue
        wanted = (
            rel == Path(state.STATE_FILE)
            or (top == "status" and path.suffix == ".json")
            or (top == "broker" and path.suffix in (".yaml", ".yml", ".json") and not path.name.startswith("."))
            or path.suffix in COPIED_SUFFIXES
        )
        if wanted:
            out.append((f"lab/{rel.as_posix()}", path))
    return out


def collect_ovn_nb(archive: Archive, prefix: str, nb: str) -> None:
    """``ovn-nbctl show`` of the NB database at ``nb``, and magw's rows of each of its tables (``find T
    external_ids:magw-owner=magw``: only the rows magw wrote, with every column)."""
    archive.command(f"{prefix}/nbctl-show.txt", ("ovn-nbctl", f"--db={nb}", "show"))
    for table in OVN_TABLES:
        argv = ("ovn-nbctl", f"--db={nb}", "--format=json", "find", table, f"external_ids:{OWNER_KEY}={OWNER}")
        archive.command(f"{prefix}/{table}.json", argv, json_out=True)


def collect_lab(archive: Archive, name: str, *, diagnose: bool = True) -> LabState:
    """Everything of lab ``name`` (NoLab when there is none)."""
    st = read_state(name)
    lab = layout(st.name, st.topology)
    for member, path in lab_files(st):
        archive.copy_file(member, path)
    archive.command("lab/lab-status.json", magw_argv("lab", "status", "--name", name, "--json"), json_out=True)
    if st.phase == "up":
        archive.command("lab/show-all.json", magw_argv("show", "all", "--lab", name, "--json"), json_out=True)
    if st.kube:
        for api in lab_kube.api_servers(st):
            collect_kube(archive, f"kube/{api.name}", str(api.kubeconfig), api.namespace)
    if st.ovn:
        for c in st.topology.clusters:
            collect_ovn_nb(archive, f"ovn/{c.id}", ovn_dir(st, c.id).nb)
    wireguard = st.topology.cable is Cable.WIREGUARD
    for node in lab.nodes:
        collect_node(archive, f"nodes/{node.name}", node.namespace, wireguard=wireguard and node.gateway,
                     state_dir=node_state_dir(st, node))  # fmt: skip
    if diagnose:
        refused = run_diagnose(archive, "diagnose/lab.json", lab_forms(name))
        if refused is not None:  # this build's diagnose has no --lab: one node at a time
            for node in lab.nodes:
                diagnose_node(archive, f"diagnose/{node.name}.json", node.namespace, refused=refused)
        archive.add_text("diagnose/BUILD.txt", build_note() + "\n", source="magw (the build that ran diagnose)")
    return st
