"""The lab's state file, ``/run/magw-lab/<name>/state.json``: what ``down`` must remove.

It holds the run's ``token``: every namespace this ``up`` creates carries the
marker ``naming.marker(name, token)``, and ``down`` removes a recorded namespace
only if it still carries it. ``control_plane`` says what feeds the daemons: ``file`` (the file broker in ``broker/``)
or ``kube`` (an API server emulator per cluster and one for the broker, sockets and kubeconfigs in ``kube/``;
``magw.lab.planes.kube``). ``cni`` is ``generic`` or ``ovn`` (an OVN control plane per cluster in ``ovn/``;
``magw.lab.planes.ovn``). It is written before anything is created and rewritten after every step that creates
something, so a partial ``up`` (crash, error, Ctrl-C) leaves a record that ``down`` can act on.
Writes are atomic (temp file + rename).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import attrs

from magw.lab.build.procs import ProcRecord
from magw.lab.errors import LabError, LabInputError
from magw.lab.spec import naming
from magw.lab.spec.topology import Topology, parse_topology

STATE_FILE = "state.json"
FORMAT_VERSION = 2
CONTROL_PLANES = ("file", "kube")
CNIS = ("generic", "ovn")  # generic: the lab's host-gw CNI; ovn: plus an OVN control plane per cluster (lab/ovn.py)


@attrs.frozen(kw_only=True)
class LabState:
    name: str
    topology: Topology
    phase: str  # "building", "up" or "failed"
    daemons: bool
    token: str
    namespaces: tuple[str, ...] = ()
    processes: tuple[ProcRecord, ...] = ()
    control_plane: str = "file"  # one of CONTROL_PLANES
    cni: str = "generic"  # one of CNIS

    @property
    def dir(self) -> Path:
        return naming.state_dir(self.name)

    @property
    def broker_dir(self) -> Path:
        return self.dir / "broker"

    @property
    def logs_dir(self) -> Path:
        return self.dir / "logs"

    @property
    def kube_dir(self) -> Path:
        return self.dir / "kube"

    @property
    def kube(self) -> bool:
        return self.control_plane == "kube"

    @property
    def ovn(self) -> bool:
        return self.cni == "ovn"

    def to_doc(self) -> dict[str, Any]:
        return {
            "format": FORMAT_VERSION,
            "name": self.name,
            "phase": self.phase,
            "daemons": self.daemons,
            "token": self.token,
            "topology": self.topology.to_doc(),
            "namespaces": list(self.namespaces),
            "processes": [p.to_doc() for p in self.processes],
            "control_plane": self.control_plane,
            "cni": self.cni,
        }

    @classmethod
    def from_doc(cls, doc: dict[str, Any], *, source: str) -> LabState:
        try:
            return cls(
                name=str(doc["name"]),
                topology=parse_topology(doc["topology"], source=f"{source}: topology"),
                phase=str(doc["phase"]),
                daemons=bool(doc["daemons"]),
                token=str(doc["token"]),
                namespaces=tuple(str(n) for n in doc["namespaces"]),
                processes=tuple(ProcRecord.from_doc(p) for p in doc["processes"]),
                control_plane=_control_plane(doc.get("control_plane", "file")),  # absent: a lab from before
                cni=_cni(doc.get("cni", "generic")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise LabError(f"{source}: unreadable lab state ({type(exc).__name__}: {exc})") from None


def _control_plane(value: object) -> str:
    if value not in CONTROL_PLANES:
        raise ValueError(f"control_plane: {value!r} is not one of {', '.join(CONTROL_PLANES)}")
    return str(value)


def _cni(value: object) -> str:
    if value not in CNIS:
        raise ValueError(f"cni: {value!r} is not one of {', '.join(CNIS)}")
    return str(value)


def state_path(name: str) -> Path:
    return naming.state_dir(name) / STATE_FILE


def write(state: LabState) -> None:
    """Atomically (re)write the state file."""
    path = state_path(state.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{STATE_FILE}.tmp")
    tmp.write_text(json.dumps(state.to_doc(), indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def add_process(st: LabState, rec: ProcRecord) -> LabState:
    """``st`` with ``rec`` recorded, written at once: a failure after the start still leaves the process for
    ``down`` to stop."""
    st = attrs.evolve(st, processes=(*st.processes, rec))
    write(st)
    return st


def read(name: str) -> LabState | None:
    """The state of lab ``name``, None if it has no state file."""
    path = state_path(name)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LabError(f"{path}: unreadable lab state ({exc})") from None
    return LabState.from_doc(doc, source=str(path))


def list_labs() -> list[str]:
    """Names of labs with a state directory."""
    try:
        return sorted(p.name for p in naming.STATE_ROOT.iterdir() if p.is_dir())
    except FileNotFoundError:
        return []


class UnknownLab(LookupError):
    """No lab of that name, or (``require(up=True)``) one that is not up; ``str()`` is one line."""


def no_lab_line(name: str) -> str:
    """``no lab named 'x' (labs: a, b)``: what every command says of a lab that does not exist."""
    labs = list_labs()
    return f"no lab named {name!r} ({'labs: ' + ', '.join(labs) if labs else 'no labs'})"


def require_with_daemons(name: str, verb: str, *, what: str = "") -> LabState:
    """The state of lab ``name``, which must be up with its daemons; else ``LabInputError`` (one line, naming
    ``verb``; ``what``: said after a lab without daemons, ": nothing to verify")."""
    try:
        st = require(name, up=True)
    except UnknownLab as exc:
        raise LabInputError(f"{verb}: {exc}") from None
    if not st.daemons:
        raise LabInputError(f"{verb}: lab {name} runs no daemons (built with --no-daemons){what}")
    return st


def require(name: str, *, up: bool = False) -> LabState:
    """The state of lab ``name``; ``UnknownLab`` when there is none or, with ``up``, when it is not up."""
    st = read(name)
    if st is None:
        raise UnknownLab(no_lab_line(name))
    if up and st.phase != "up":
        raise UnknownLab(f"lab {name!r} is {st.phase}, not up (magw lab status --name {name})")
    return st
