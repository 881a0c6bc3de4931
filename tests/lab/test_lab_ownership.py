"""The lab touches only what it made: a namespace that merely shares the lab's prefix survives `down`.

Kernel tests on a small topology without daemons (7 namespaces). A bystander is a
namespace the test makes with plain `ip netns add`, named with the lab's prefix,
with a `sleep` of the test's own inside it; the test removes both in `finally`.
What survives is read back with `ip netns list` (os.listdir of /run/netns) and
/proc, independently of the lab's marker code.
"""

from __future__ import annotations

import subprocess

import pytest

from magw.lab.build import lifecycle as build
from magw.lab.build import netns, state
from magw.lab.build.state import LabState
from magw.lab.errors import LabError
from magw.lab.spec import naming
from magw.lab.spec.layout import layout
from magw.lab.spec.topology import Topology, parse_topology
from tests.support.cli import MagwCli
from tests.support.labkit import NOTHING_LEFT, bystander, leftovers, unique_name

pytestmark = pytest.mark.kernel


def _small() -> Topology:
    return parse_topology({"clusters": [{"id": "a", "gateways": 1, "workers": 0, "pods_per_node": 1},
                                        {"id": "b", "gateways": 1, "workers": 0, "pods_per_node": 1}]})  # fmt: skip


def _alive(proc: subprocess.Popen[bytes]) -> bool:
    return proc.poll() is None


def test_down_leaves_a_bystander_and_its_process_alone() -> None:
    """With the state file: `down` removes the lab, keeps `<lab>-keepme` and the process in it, and names it."""
    name = unique_name()
    keep = f"{name}-keepme"
    try:
        st = build.up(_small(), name=name, daemons=False)
        with bystander(keep) as sleeper:
            report = build.down(name)
            assert report.left_alone == ((keep, f"not made by lab {name}"),)
            assert sorted(report.namespaces) == sorted(st.namespaces)
            assert keep in netns.list_namespaces()
            assert _alive(sleeper)
            assert sleeper.pid not in report.processes
            assert leftovers(name, st.processes, bystanders=[keep]) == NOTHING_LEFT
    finally:
        build.down(name)


def test_cli_down_without_state_file_keeps_the_bystander_and_says_so(magw_cli: MagwCli) -> None:
    """State file lost (a crashed `up`): `magw lab down` still removes every marked namespace and the echo
    servers inside them, and prints one `left alone:` line for the bystander, which survives with its process."""
    name = unique_name()
    keep = f"{name}-keepme"
    try:
        st = build.up(_small(), name=name, daemons=False)
        (naming.state_dir(name) / state.STATE_FILE).unlink()
        with bystander(keep) as sleeper:
            down = magw_cli("lab", "down", "--name", name)
            assert down.returncode == 0, down.stderr
            assert down.stdout.splitlines() == [
                f"left alone: {keep} (not made by lab {name})",
                f"lab {name}: removed {len(st.namespaces)} namespaces, {len(st.processes)} processes",
            ]
            assert keep in netns.list_namespaces()
            assert _alive(sleeper)
            assert leftovers(name, st.processes, bystanders=[keep]) == NOTHING_LEFT
    finally:
        build.down(name)


def test_up_refuses_to_start_next_to_a_bystander() -> None:
    """`up` of a lab whose prefix a foreign namespace uses fails with one line, creates nothing, keeps it."""
    name = unique_name()
    keep = f"{name}-keepme"
    try:
        with bystander(keep) as sleeper:
            with pytest.raises(LabError) as err:
                build.up(_small(), name=name, daemons=False)
            assert str(err.value) == (
                f"lab {name!r}: namespace {keep} has the lab's prefix '{name}-' but was not made by it; "
                "remove it or pick another --name"
            )
            assert [ns for ns in netns.list_namespaces() if ns.startswith(f"{name}-")] == [keep]
            assert not naming.state_dir(name).exists()
            assert _alive(sleeper)
    finally:
        build.down(name)


def test_down_after_a_half_done_up_removes_what_up_made_and_only_that() -> None:
    """A state file written by `up` (phase building) with only some namespaces created, one of the recorded
    names taken by someone else's namespace: `down` removes the marked ones and keeps the impostor."""
    name = unique_name()
    lab = layout(name, _small())
    made, foreign = lab.namespaces[:3], lab.namespaces[3]
    token = "0123456789abcdef"
    st = LabState(name=name, topology=_small(), phase="building", daemons=False, token=token,
                  namespaces=lab.namespaces)  # fmt: skip
    try:
        state.write(st)
        for ns in made:
            netns.add_namespace(ns, lo_alias=naming.marker(name, token))
        with bystander(foreign) as sleeper:
            report = build.down(name)
            assert sorted(report.namespaces) == sorted(made)
            assert report.left_alone == ((foreign, f"not made by lab {name}"),)
            assert [ns for ns in netns.list_namespaces() if ns.startswith(f"{name}-")] == [foreign]
            assert _alive(sleeper)
            assert not naming.state_dir(name).exists()
    finally:
        build.down(name)


def test_down_without_state_removes_marked_namespaces_only() -> None:
    """No state file at all (`up` died before writing it): namespaces with the lab's marker go, whatever their
    token; one marked for another lab, and an unmarked one, stay."""
    name, other = unique_name(), unique_name()
    lab = layout(name, _small())
    mine = lab.namespaces[:2]
    alien, plain = f"{name}-alien", f"{name}-plain"
    try:
        netns.add_namespace(mine[0], lo_alias=naming.marker(name, "aaaaaaaaaaaaaaaa"))
        netns.add_namespace(mine[1], lo_alias=naming.marker(name, "bbbbbbbbbbbbbbbb"))
        netns.add_namespace(alien, lo_alias=naming.marker(other, "aaaaaaaaaaaaaaaa"))
        with bystander(plain):
            report = build.down(name)
            assert sorted(report.namespaces) == sorted(mine)
            assert report.left_alone == ((alien, f"not made by lab {name}"), (plain, f"not made by lab {name}"))
            assert sorted(ns for ns in netns.list_namespaces() if ns.startswith(f"{name}-")) == [alien, plain]
    finally:
        subprocess.run(["ip", "netns", "del", alien], check=False, timeout=10)
        build.down(name)


def test_state_token_must_match_the_marker() -> None:
    """A namespace marked by another run of the same lab name is not the one the state file records: kept."""
    name = unique_name()
    lab = layout(name, _small())
    ns = lab.namespaces[0]
    st = LabState(name=name, topology=_small(), phase="up", daemons=False, token="1111111111111111",
                  namespaces=lab.namespaces)  # fmt: skip
    try:
        state.write(st)
        netns.add_namespace(ns, lo_alias=naming.marker(name, "2222222222222222"))
        report = build.down(name)
        assert report.namespaces == ()
        assert report.left_alone == ((ns, f"made by another run of lab {name}, not the one in its state file"),)
        assert ns in netns.list_namespaces()
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False, timeout=10)
        build.down(name)
