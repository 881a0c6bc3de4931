"""``magw plan`` and the command line's contract: output, exit codes, one-line errors, lazy imports."""

from __future__ import annotations

import json
import logging
import pathlib
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import attrs
import pytest
import structlog

from magw.cli import main as cli_main
from magw.desired.node.planner import plan
from magw.desired.render import render_text
from magw.model import Cni
from magw.snapshot.load import dump_snapshot, load_snapshot
from tests.support.cli import MagwCli
from tests.support.paths import REPO

SEED = REPO / "examples" / "seed-east.yaml"
THREE = REPO / "examples" / "three-clusters.yaml"
WEST_GROUP = 0x63FFFFFD  # a worker's main class (magw.desired.node.classes)


def plan_json(magw_cli: MagwCli, *args: str) -> dict[str, Any]:
    result = magw_cli("plan", "--snapshot", str(SEED), "--format", "json", *args)
    assert (result.returncode, result.stderr) == (0, "")
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def route(doc: dict[str, Any], dst: str) -> dict[str, Any]:
    matches = [r for r in doc["routes"] if r["dst"] == dst]
    assert len(matches) == 1, matches
    return matches[0]


def unquote_choices(text: str) -> str:
    """argparse quotes the choices in "invalid choice" up to Python 3.12.7 and not after: compare without."""
    return re.sub(r"\(choose from ([^)]*)\)", lambda m: "(choose from " + m.group(1).replace("'", "") + ")", text)


def assert_usage_error(result: subprocess.CompletedProcess[str], message: str) -> None:
    """Exit 2, nothing on stdout, exactly one stderr line, no traceback."""
    assert result.returncode == 2
    assert result.stdout == ""
    assert unquote_choices(result.stderr) == f"magw: error: {message}\n"
    assert "Traceback" not in result.stderr


def test_text_output_is_the_rendered_plan(magw_cli: MagwCli) -> None:
    """``--format text`` (the default) prints render_text() of the node's DesiredState, ending with a newline."""
    result = magw_cli("plan", "--snapshot", str(SEED), "--node", "e-w1")
    assert (result.returncode, result.stderr) == (0, "")
    expected = render_text(plan(load_snapshot(SEED), "e-w1"))
    assert result.stdout.rstrip("\n") == expected.rstrip("\n")
    assert result.stdout.endswith("\n")
    lines = result.stdout.splitlines()
    assert f"route 100.2.0.0/16 table main nhid {WEST_GROUP} src 10.1.3.1 metric 100" in lines
    assert "fdb 02:53:f0:12:00:06 dev vx-submariner dst 172.18.0.6 self permanent" in lines


def test_json_worker_routes_resolve_to_both_local_gateways(magw_cli: MagwCli) -> None:
    """A worker's route to west's services goes through the group of both local gateways' 240/8 VTEPs."""
    doc = plan_json(magw_cli, "--node", "e-w1")
    assert route(doc, "100.2.0.0/16") == {
        "table": 254,
        "dst": "100.2.0.0/16",
        "metric": 100,
        "src": "10.1.3.1",
        "type": "unicast",
        "nhid": WEST_GROUP,
        "nexthops": [
            {"via": "240.18.0.6", "dev": "vx-submariner", "weight": 1},
            {"via": "240.18.0.8", "dev": "vx-submariner", "weight": 1},
        ],
    }
    assert [g["type"] for g in doc["groups"]] == ["resilient"]
    assert doc["rules"] == []


def test_json_gateway_routes_table_100_through_remote_gateways(magw_cli: MagwCli) -> None:
    """A gateway's table 100 routes west's CIDRs through west's gateways' 241/8 VTEPs on vxlan-tunnel."""
    doc = plan_json(magw_cli, "--node", "e-gw1")
    west = route(doc, "100.2.0.0/16")
    assert (west["table"], west["metric"], west["src"]) == (100, 100, "10.1.1.1")
    assert west["nexthops"] == [
        {"via": "241.18.0.4", "dev": "vxlan-tunnel", "weight": 1},
        {"via": "241.18.0.9", "dev": "vxlan-tunnel", "weight": 1},
    ]
    assert doc["rules"] == [{"priority": 100, "table": 100}]
    assert sorted(link["name"] for link in doc["links"]) == ["vx-submariner", "vxlan-tunnel"]


def test_json_output_is_sorted_and_indented(magw_cli: MagwCli) -> None:
    """The JSON is ``json.dumps(indent=2, sort_keys=True)``: byte-stable for diffs and golden files."""
    result = magw_cli("plan", "--snapshot", str(SEED), "--node", "e-gw1", "--format", "json")
    assert result.stdout == json.dumps(json.loads(result.stdout), indent=2, sort_keys=True) + "\n"


def test_strategy_flag_overrides_the_snapshot(magw_cli: MagwCli) -> None:
    """``--strategy multipath`` gives inline nexthops and no nexthop objects; ``group`` gives an mpath group."""
    multipath = plan_json(magw_cli, "--node", "e-w1", "--strategy", "multipath")
    assert (multipath["nexthops"], multipath["groups"]) == ([], [])
    west = route(multipath, "100.2.0.0/16")
    assert (west["nhid"], [h["via"] for h in west["nexthops"]]) == (None, ["240.18.0.6", "240.18.0.8"])

    group = plan_json(magw_cli, "--node", "e-w1", "--strategy", "group")
    assert [(g["id"], g["type"]) for g in group["groups"]] == [(0x62FFFFFD, "mpath")]


def test_reads_the_snapshot_from_stdin(magw_cli: MagwCli) -> None:
    """``--snapshot -`` reads stdin; errors then name ``<stdin>``."""
    result = magw_cli("plan", "--snapshot", "-", "--node", "e-w1", stdin=SEED.read_text())
    assert (result.returncode, result.stdout) == (0, magw_cli("plan", "--snapshot", str(SEED), "--node", "e-w1").stdout)
    bad = magw_cli("plan", "--snapshot", "-", "--node", "e-w1", stdin="local_cluster: [\n")
    assert bad.returncode == 2
    assert bad.stderr.startswith("magw: error: <stdin>:2: ")


def test_three_clusters_health_and_reach(magw_cli: MagwCli) -> None:
    """In the three-cluster example, north is reached only through e-gw1 (e-gw2 cannot reach it)."""
    result = magw_cli("plan", "--snapshot", str(THREE), "--node", "e-w1", "--format", "json")
    assert result.returncode == 0
    doc = json.loads(result.stdout)
    assert [h["via"] for h in route(doc, "10.3.0.0/16")["nexthops"]] == ["240.18.0.6"]
    assert [h["via"] for h in route(doc, "10.2.0.0/16")["nexthops"]] == ["240.18.0.6", "240.18.0.8"]


def test_unknown_node_lists_the_known_nodes(magw_cli: MagwCli) -> None:
    """An unknown --node is bad input: exit 2 and one line naming the nodes that exist."""
    result = magw_cli("plan", "--snapshot", str(SEED), "--node", "e-w9")
    assert_usage_error(result, "--node: unknown node 'e-w9' (known nodes: e-gw1, e-gw2, e-w1)")


def test_invalid_snapshot_is_one_line_with_field_path(tmp_path: pathlib.Path, magw_cli: MagwCli) -> None:
    """A snapshot the loader refuses gives exit 2 and its one-line message."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(SEED.read_text().replace("10.2.0.0/16", "10.2.0.0/33"))
    assert_usage_error(
        magw_cli("plan", "--snapshot", str(bad), "--node", "e-w1"),
        f"{bad}: clusters[1].pod_cidrs[0]: '10.2.0.0/33' is not an IPv4 CIDR",
    )


def test_yaml_syntax_error_names_file_and_line(tmp_path: pathlib.Path, magw_cli: MagwCli) -> None:
    """Broken YAML: exit 2, ``file:line: reason``."""
    bad = tmp_path / "broken.yaml"
    bad.write_text("local_cluster: east\nclusters: [\n")
    result = magw_cli("plan", "--snapshot", str(bad), "--node", "e-w1")
    assert_usage_error(
        result, f"{bad}:3: expected the node content, but found '<stream end>' (while parsing a flow node)"
    )


def test_missing_file(tmp_path: pathlib.Path, magw_cli: MagwCli) -> None:
    """A snapshot path that does not exist is bad input, not a crash."""
    missing = tmp_path / "missing.yaml"
    assert_usage_error(
        magw_cli("plan", "--snapshot", str(missing), "--node", "e-w1"),
        f"{missing}: cannot read: No such file or directory",
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["plan", "--snapshot", str(SEED)], "the following arguments are required: --node"),
        (
            ["plan", "--snapshot", str(SEED), "--node", "e-w1", "--format", "yaml"],
            "argument --format: invalid choice: 'yaml' (choose from text, json)",
        ),
        (
            ["plan", "--snapshot", str(SEED), "--node", "e-w1", "--strategy", "ecmp"],
            "argument --strategy: invalid choice: 'ecmp' (choose from resilient, group, multipath)",
        ),
        (["plan", "--snapshot", str(SEED), "--node", "e-w1", "--extra"], "unrecognized arguments: --extra"),
        ([], "the following arguments are required: COMMAND"),
    ],
    ids=["missing-node", "bad-format", "bad-strategy", "unknown-flag", "no-command"],
)
def test_bad_command_lines_exit_2_with_one_line(args: list[str], message: str, magw_cli: MagwCli) -> None:
    """argparse's own errors follow the same contract: one line, exit 2, no usage dump."""
    assert_usage_error(magw_cli(*args), message)


def test_plan_does_not_import_pyroute2() -> None:
    """``magw plan`` is pure: neither pyroute2 nor any driver module is imported."""
    code = textwrap.dedent(
        f"""
        import sys
        from magw.cli.main import main
        rc = main(["plan", "--snapshot", {str(SEED)!r}, "--node", "e-gw1"])
        loaded = sorted(m for m in sys.modules if m.startswith(("pyroute2", "nftables", "magw.drivers")))
        print(rc, loaded, file=sys.stderr)
        """
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert result.stderr == "0 []\n"


def test_verbose_json_logs_go_to_stderr(magw_cli: MagwCli) -> None:
    """``--log-format json -v`` writes structlog events as JSON lines on stderr; stdout stays the plan."""
    result = magw_cli("--log-format", "json", "-v", "plan", "--snapshot", str(SEED), "--node", "e-w1")
    assert result.returncode == 0
    events = [json.loads(line) for line in result.stderr.splitlines()]
    assert [(e["event"], e["level"], e["node"], e["routes"], e["strategy"]) for e in events] == [
        ("cli.plan_done", "info", "e-w1", 2, "resilient")
    ]
    assert result.stdout.startswith("link vx-submariner ")


def test_global_flags_also_work_after_the_subcommand(magw_cli: MagwCli) -> None:
    """``magw plan ... -v`` is the same as ``magw -v plan ...``."""
    result = magw_cli("plan", "--snapshot", str(SEED), "--node", "e-w1", "-v", "--log-format", "json")
    assert [json.loads(line)["event"] for line in result.stderr.splitlines()] == ["cli.plan_done"]


def test_console_script_is_installed() -> None:
    """The ``magw`` console script (pyproject [project.scripts]) runs main()."""
    result = subprocess.run(
        [str(pathlib.Path(sys.executable).parent / "magw"), "--version"], capture_output=True, text=True, timeout=60
    )
    assert (result.returncode, result.stdout) == (0, "magw 0.1.0\n")


# --- the subcommand table (in-process, with fake command modules) ---


@pytest.fixture
def fake_commands(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Replace the command table with fake modules: one that works, one that fails, one that is absent."""
    (tmp_path / "magwfake_ok.py").write_text(
        textwrap.dedent(
            """
            from magw.cli import UsageError

            def add_arguments(parser):
                parser.add_argument("--what", default="ok")

            def run(args):
                if args.what == "bad":
                    raise UsageError("--what: 'bad' is not allowed")
                if args.what == "boom":
                    raise RuntimeError("the kernel said no")
                print("ran", args.what)
                return 0
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(
        cli_main,
        "COMMANDS",
        (
            cli_main.Command(name="ok", module="magwfake_ok", help="a command that exists"),
            cli_main.Command(name="gone", module="magwfake_not_installed", help="a command whose module is absent"),
        ),
    )
    root = logging.getLogger()
    level = root.level
    yield
    # main() configured logging for this process: put it back so later tests see the defaults.
    structlog.reset_defaults()
    root.setLevel(level)
    for handler in [h for h in root.handlers if getattr(h, "_magw", False)]:
        root.removeHandler(handler)


@pytest.mark.usefixtures("fake_commands")
def test_absent_command_modules_are_not_offered(capsys: pytest.CaptureFixture[str]) -> None:
    """A command whose module does not exist is missing from --help and refused like an unknown word."""
    assert cli_main.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "a command that exists" in out
    assert "gone" not in out
    assert cli_main.main(["gone"]) == 2
    err = unquote_choices(capsys.readouterr().err)
    assert err == "magw: error: argument COMMAND: invalid choice: 'gone' (choose from ok)\n"


@pytest.mark.usefixtures("fake_commands")
@pytest.mark.parametrize(
    ("args", "code", "out", "err"),
    [
        (["ok"], 0, "ran ok\n", ""),
        (["ok", "--what", "bad"], 2, "", "magw: error: --what: 'bad' is not allowed\n"),
        (["ok", "--what", "boom"], 1, "", "magw: error: ok: RuntimeError: the kernel said no\n"),
    ],
    ids=["ok", "usage-error", "runtime-failure"],
)
def test_exit_codes_of_a_subcommand(
    args: list[str], code: int, out: str, err: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """0 for success, 2 for UsageError, 1 for any other exception; errors are one stderr line."""
    assert cli_main.main(args) == code
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == (out, err)



def test_ovn_mgmt_nexthop_sets_table_150s_next_hop_as_the_route_agents_flag(
    magw_cli: MagwCli, tmp_path: pathlib.Path
) -> None:
    """With ``cni: ovn`` a worker's table 150 goes through ovn-k8s-mp0's next hop, which this seed's cni_ip (the
    subnet's .1, OVN-K's router) cannot give: the plan asks for the flag, as the route agent does, and uses it."""
    snap = load_snapshot(SEED)
    ovn = tmp_path / "ovn.yaml"
    ovn.write_text(dump_snapshot(attrs.evolve(snap, config=attrs.evolve(snap.config, cni=Cni.OVN))))
    base = ("plan", "--snapshot", str(ovn), "--node", "e-w1")
    result = magw_cli(*base, "--format", "json", "--ovn-mgmt-nexthop", "10.1.3.77")
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    routes = [r for r in json.loads(result.stdout)["routes"] if r["table"] == 150]
    assert routes and {h["via"] for r in routes for h in r["nexthops"]} == {"10.1.3.77"}
    assert_usage_error(magw_cli(*base), "plan: node cni_ip 10.1.3.1: OVN-Kubernetes gives ovn-k8s-mp0 "
                       "the subnet's second address and its router the first, so the management next hop cannot be "
                       "derived from it; give --ovn-mgmt-nexthop")  # fmt: skip
    assert_usage_error(magw_cli(*base, "--ovn-mgmt-nexthop", "x"),
                       "argument --ovn-mgmt-nexthop: 'x' is not an IPv4 address")  # fmt: skip
