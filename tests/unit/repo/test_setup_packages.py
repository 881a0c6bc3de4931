"""scripts/setup.sh installs exactly the Debian packages the project uses today, and README.md names them.

Each package must have a user in the repository: the test holds, per package,
the file and the text that show it is used (a package that nothing needs yet
comes with the feature that needs it). The evidence is read from the files, so
a package whose last user goes away fails here.
"""

from __future__ import annotations

import re

from tests.support.paths import REPO

SETUP = REPO / "scripts" / "setup.sh"

# package -> (file that uses it, text there that shows the use)
USED_BY = {
    "iproute2": ("magw/lab/build/netns.py", '["ip", '),
    "nftables": ("tests/support/netns.py", '"nft", "-j"'),
    "libnftables1": ("magw/drivers/nft/libnft.py", '"libnftables.so.1"'),
    "python3-nftables": ("magw/drivers/nft/libnft.py", "import nftables"),
    "iperf3": ("benchmarks/throughput.py", '"iperf3", "-c"'),
    "procps": ("magw/lab/build/netns.py", '"sysctl", "-q", "-w"'),
    "python3-venv": ("scripts/setup.sh", "-m venv .venv"),
    "ovn-central": ("magw/lab/planes/ovn_servers.py", '"ovn-northd", "--no-chdir"'),
    "python3-openvswitch": ("scripts/setup.sh", "/usr/lib/python3/dist-packages/ovs/_json"),
    "openvswitch-switch": ("magw/lab/planes/ovn_nodes.py", '"ovs-vswitchd", "ovs-vsctl"'),
    "keepalived": ("magw/drivers/keepalived/process.py", 'BINARY = "keepalived"'),
    "conntrackd": ("magw/drivers/conntrackd/process.py", 'BINARY = "conntrackd"'),
    "conntrack": ("tests/kernel/test_egress_nat_sync.py", '"conntrack", "-L"'),
    "wireguard-go": ("magw/drivers/wireguard/userspace.py", "exec wireguard-go -f"),
    "wireguard-tools": ("magw/drivers/wireguard/tool.py", 'WG = "wg"'),
    "ovn-host": ("magw/lab/planes/ovn_nodes.py", '"ovn-controller", ovs_db(st, node)'),
    "ethtool": ("magw/lab/planes/ovn_nodes.py", '"ethtool", "-K", dev, "tx", "off"'),
    "tmux": ("tests/lab/test_top.py", '["tmux", "-L", self.socket, *args]'),
}


def apt_packages() -> list[str]:
    found = re.search(r"^APT_PACKAGES=\(([^)]*)\)", SETUP.read_text(encoding="utf-8"), re.M)
    assert found is not None, "scripts/setup.sh has no APT_PACKAGES=(...) line"
    return found[1].split()


def test_setup_installs_only_packages_with_a_user() -> None:
    """The package list is the used set: no package without a user (socat had none; keepalived had none until the
    egress gateway)."""
    evidence = {pkg: text in (REPO / path).read_text(encoding="utf-8") for pkg, (path, text) in USED_BY.items()}
    assert (sorted(apt_packages()), evidence) == (sorted(USED_BY), dict.fromkeys(USED_BY, True))


def test_readme_names_the_packages_setup_installs() -> None:
    """README.md's setup sentence names every package setup.sh installs, and no other Debian package."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    sentence = readme[readme.index("`scripts/setup.sh` installs") :].split("\n\n")[0]
    named = {p: re.search(rf"(?<![\w-]){re.escape(p)}(?![\w-])", sentence) is not None for p in USED_BY}
    assert (named, "socat" in sentence) == (dict.fromkeys(USED_BY, True), False)
