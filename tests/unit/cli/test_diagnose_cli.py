"""``magw diagnose``'s bad input: one line on stderr, exit 2; and the kubeconfig's API server as the clock."""

from __future__ import annotations

import re

import pytest

from magw.ops.diagnose.clock import KubeconfigError, kubeconfig_server
from tests.support.cli import MagwCli

KUBECONFIG = """
apiVersion: v1
kind: Config
current-context: east
contexts:
  - {name: west, context: {cluster: w}}
  - {name: east, context: {cluster: e, user: u}}
clusters:
  - {name: w, cluster: {server: "https://10.0.0.2:6443"}}
  - {name: e, cluster: {server: "https://10.0.0.1:6443/"}}
users:
  - {name: u, user: {token: secret}}
"""


def test_the_current_contexts_server_is_the_clock_reference() -> None:
    assert kubeconfig_server(KUBECONFIG, "k") == "https://10.0.0.1:6443/version"


@pytest.mark.parametrize(("text", "says"), [
    ("{", "not YAML"),
    ("- a", "not a kubeconfig"),
    (KUBECONFIG.replace("current-context: east", "current-context: north"), "'north' is not among its contexts"),
    (KUBECONFIG.replace("https://10.0.0.1:6443/", "10.0.0.1"), "cluster 'e' has no http(s) server"),
])
def test_a_kubeconfig_without_a_server_is_one_line(text: str, says: str) -> None:
    with pytest.raises(KubeconfigError, match=re.escape(says)):
        kubeconfig_server(text, "k")


@pytest.mark.parametrize(("args", "error"), [
    (("--node", "east-gw1"), "--node: only with --lab NAME"),
    (("--kubeconfig", "/nonexistent/kc"), "--kubeconfig /nonexistent/kc: No such file or directory"),
    (("--lab", "magwt-no-such-lab-x"), "--lab: no lab named 'magwt-no-such-lab-x'"),
    (("bogus",), "argument topic: invalid choice: 'bogus'"),
])
def test_bad_input_exits_2_with_one_line(args: tuple[str, ...], error: str, magw_cli: MagwCli) -> None:
    out = magw_cli("diagnose", *args)
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr.startswith("magw: error: ") and error in out.stderr and out.stderr.count("\n") == 1
