"""``magw gather``'s command line: bad input is one line and exit 2, before anything is written; which files of a
lab's directory are taken (never a key file or a kubeconfig)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from magw.cli.main import main
from magw.lab.build import state
from magw.lab.build.state import LabState
from magw.lab.spec import naming
from magw.lab.spec.topology import parse_topology
from magw.ops.gather.lab import lab_files
from magw.ops.gather.run import default_output, top_dir


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "gather: say what to gather: --lab NAME, --netns NS (or --node), --kubeconfig FILE"),
        (["--lab", "x", "--node"], "gather: --lab gathers the whole lab; it goes without --netns, --node and --"),
        (["--netns", "a", "--node"], "gather: --netns NS and --node (the current namespace) name two nodes: give one"),
        (["--kubeconfig", "k", "--file", "f"], "gather: --state-dir and --file go with --netns or --node"),
        (["--node", "--timeout", "0"], "--timeout: 0 is not a positive number of seconds"),
        (["--kubeconfig", "/nonexistent/kc"], "--kubeconfig /nonexistent/kc: no such file"),
        (["--node", "--file", "/nonexistent/f.log"], "--file /nonexistent/f.log: no such file"),
        (["--node", "-o", "/nonexistent/dir/x.tar.gz"], "-o /nonexistent/dir/x.tar.gz: no directory /nonexistent/dir"),
        (["--netns", "magw-no-such-ns-q9"], "--netns: "),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str],
                                          tmp_path: Path) -> None:  # fmt: skip
    """Each refusal names what is wrong; nothing is written to the working directory."""
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        code = main(["gather", *argv])
    finally:
        os.chdir(cwd)
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"magw: error: {message}")
    assert err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_unknown_lab_names_the_labs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """``--lab`` of a lab that does not exist: exit 2, the labs there are, and no tarball left behind."""
    monkeypatch.setattr(naming, "STATE_ROOT", tmp_path / "labs")
    (tmp_path / "labs" / "other").mkdir(parents=True)
    out = tmp_path / "g.tar.gz"
    assert main(["gather", "--lab", "nolab", "-o", str(out)]) == 2
    assert capsys.readouterr().err == "magw: error: --lab: no lab named 'nolab' (labs: other)\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["labs"]


def test_lab_files_never_take_keys_or_kubeconfigs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Of a lab's directory the gather takes the state file, status files, broker documents, logs and the egress
    agents' configurations; a private key, a kubeconfig, a socket-side file or a temp file is never taken."""
    monkeypatch.setattr(naming, "STATE_ROOT", tmp_path)
    topo = parse_topology({"clusters": [{"id": "east"}, {"id": "west"}]})
    st = LabState(name="lg", topology=topo, phase="up", daemons=True, token="t")
    state.write(st)
    files = {
        "status/route-agent-east-gw1.json": "{}",
        "broker/endpoint-east@east-gw1.yaml": "kind: Endpoint",
        "broker/.endpoint-x.yaml.tmp": "partial",
        "logs/route-agent-east-gw1.log": "log",
        "state/east-gw1/wireguard/private.key": "KEY",
        "state/east-gw1/wireguard/wireguard-go.log": "wglog",
        "state/east-gw1/wireguard/wireguard-go.pid": "1",
        "kube/cluster-east.kubeconfig": "token: x",
        "kube/cluster-east.log": "in kube/: summarised through the API instead",
        "egress/east-gw1/keepalived/keepalived.conf": "vrrp_instance",
        "ovn/east/nb.log": "nblog",
        "ovn/east/nb.db": "db",
    }
    for rel, text in files.items():
        path = st.dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    taken = sorted(member for member, _path in lab_files(st))
    assert taken == [
        "lab/broker/endpoint-east@east-gw1.yaml",
        "lab/egress/east-gw1/keepalived/keepalived.conf",
        "lab/logs/route-agent-east-gw1.log",
        "lab/ovn/east/nb.log",
        "lab/state.json",
        "lab/state/east-gw1/wireguard/wireguard-go.log",
        "lab/status/route-agent-east-gw1.json",
    ]


def test_output_names() -> None:
    """The default tarball is named by the time; its members sit under a directory of the same name."""
    from datetime import UTC, datetime

    out = default_output(datetime(2026, 11, 28, 20, 1, 2, tzinfo=UTC))
    assert out == Path("magw-gather-20261128T200102Z.tar.gz")
    assert top_dir(out) == "magw-gather-20261128T200102Z"
    assert top_dir(Path("/tmp/report.tgz")) == "report"
    assert top_dir(Path("report")) == "report"
