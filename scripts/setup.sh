#!/usr/bin/env bash
# Set up a fresh Debian 12 machine (as root) for magw: system packages, then the virtualenv.
# Idempotent: safe to run again; it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

# What the project uses today: ip/tc/bridge (iproute2), the nft command (tests check the kernel with it),
# libnftables through Debian's official Python binding python3-nftables (locked to libnftables1's version),
# iperf3 (benchmarks/throughput.py), sysctl (procps; the lab), python3-venv (the virtualenv).
# OVN (docs/ovn.md): ovn-central gives the NB/SB ovsdb-servers, ovn-northd, ovn-nbctl/sbctl and ovn-trace (tests and
# the lab start them by hand in temp dirs); python3-openvswitch gives the venv's ovs its C JSON parser (below);
# openvswitch-switch gives ovs-vswitchd and ovs-vsctl for br-submariner (the route agent's OVN mode, docs/ovn-node.md).
# ovn-host gives ovn-controller and ethtool turns checksum offload off on pods' interfaces: the OVN lab carries packets
# through a userspace (netdev) Open vSwitch per node (docs/ovn-lab.md).
# The egress gateway (docs/egress-ha.md): keepalived holds each VIP (VRRPv3), conntrackd syncs the NAT'ed flows between a
# VIP's candidates, conntrack (the CLI) reads the kernel's table in the tests (docs/egress-ha.md).
# tmux: the test of `magw top` drives it in a detached tmux session and reads the screen (docs/cli.md).
APT_PACKAGES=(iproute2 nftables libnftables1 python3-nftables iperf3 procps python3-venv ovn-central python3-openvswitch openvswitch-switch keepalived conntrackd conntrack wireguard-go wireguard-tools ovn-host ethtool tmux)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: need root to install Debian packages (missing: ${missing[*]})" >&2
    exit 1
  fi
  apt-get update -qq
  # Packages with daemons (ovn-central, openvswitch-switch, keepalived, conntrackd) must not start them on the host: a policy-rc.d
  # that refuses every start, only for this install and only if the machine has none of its own.
  policy=/usr/sbin/policy-rc.d
  own_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && own_policy=1
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT  # also when the install fails
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  if ((own_policy)); then rm -f "$policy"; fi
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $($PY --version)"
  "$PY" -m venv .venv
fi
# Reinstall only when the project metadata changed since the last install.
stamp=.venv/.magw-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "setup: installing magw and its test tools into .venv"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e '.[test]'
  touch "$stamp"
fi
# Debian's python3-nftables lives in /usr/lib/python3/dist-packages, which our virtualenv does not see (it may
# run another Python than Debian's). Expose that ONE package, not the whole directory: a directory holding only
# a symlink to it, listed in a .pth file of the venv's site-packages. Rewritten on every run (idempotent).
nft_pkg=/usr/lib/python3/dist-packages/nftables
nft_dir="$PWD/.venv/debian-nftables"
if [ ! -f "$nft_pkg/__init__.py" ]; then
  echo "setup: $nft_pkg is missing; install python3-nftables" >&2
  exit 1
fi
mkdir -p "$nft_dir"
ln -sfn "$nft_pkg" "$nft_dir/nftables"
site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$nft_dir" >"$site/debian-nftables.pth"
.venv/bin/python -c 'import nftables' || { echo "setup: the venv cannot import nftables" >&2; exit 1; }
# pip's `ovs` (under ovsdbapp) has no compiled JSON parser: its pure-Python one was most of a large OVN sync's
# time (docs/ovn-driver.md). Debian's python3-openvswitch ships the C one (ovs/_json, for CPython 3.11, linked to
# Debian's libopenvswitch); link it into the venv's ovs package, where ovs.json picks it up when it imports.
ovs_json=$(ls /usr/lib/python3/dist-packages/ovs/_json.cpython-*.so 2>/dev/null | head -1 || true)
ovs_dir=$(.venv/bin/python -c 'import os, ovs; print(os.path.dirname(ovs.__file__))')
abi=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
if [ -n "$ovs_json" ] && [ "$(basename "$ovs_json")" = "_json$abi" ]; then
  ln -sfn "$ovs_json" "$ovs_dir/_json$abi"
  .venv/bin/python -c 'import ovs.json, sys; sys.exit(ovs.json.PARSER != "C")' \
    || { echo "setup: Debian's ovs/_json does not load in the venv; removing it (pure-Python parser)" >&2; rm -f "$ovs_dir/_json$abi"; }
else
  echo "setup: no C JSON parser for the venv's Python in python3-openvswitch; OVN syncs use the slower pure-Python one"
fi
echo "setup: ready"
