#!/bin/bash
# The egress steering experiment of docs/egress-datapath.md, by hand (ip, nft, a Python GARP), in throwaway
# namespaces named $P-*: 3 nodes on one bridge, an outside server, 4 pods; VIP A (vrid 100) and VIP B (vrid 101)
# start on n1; egress, ingress, hairpin are checked, then VIP A moves to n3 (addr del/add + one GARP) and
# new flows are counted on n3's magw-egress. Run as root. Everything is removed on exit.
set -e
export P=${P:-egx$$}
here=$(cd "$(dirname "$0")" && pwd)
cleanup() { for n in $(ip netns list | awk '{print $1}' | grep "^$P-"); do ip netns del "$n"; done; }
trap cleanup EXIT
"$here/topo.sh"
"$here/egress.sh"
"$here/check.sh"
ne() { ip netns exec "$@"; }
E="$here/../../tests/support/dataplane_echo.py"
ne $P-out timeout 20 python3 "$E" udp-server 192.168.77.200 9001 --seconds 15 --max 100 >/dev/null 2>&1 &
sleep 0.3
ne $P-pa timeout 5 python3 "$E" udp-client 192.168.77.200 9001 --count 3 --timeout 1 >/dev/null
echo "n2's ARP entry for VIP A before the move: $(ne $P-n2 ip neigh show 192.168.77.100)"
ne $P-n1 ip addr del 192.168.77.100/32 dev eth0
ne $P-n3 ip addr add 192.168.77.100/32 dev eth0
ne $P-n3 python3 "$here/garp.py" eth0 192.168.77.100 1
echo "after one GARP from n3 ($(ne $P-n3 cat /sys/class/net/eth0/address)): $(ne $P-n2 ip neigh show 192.168.77.100)"
r1=$(ne $P-n3 cat /sys/class/net/magw-egress/statistics/rx_packets)
ne $P-pa timeout 5 python3 "$E" udp-client 192.168.77.200 9001 --count 3 --timeout 1
ne $P-pl timeout 5 python3 "$E" udp-client 192.168.77.200 9001 --count 3 --timeout 1
r2=$(ne $P-n3 cat /sys/class/net/magw-egress/statistics/rx_packets)
echo "n3 (new holder) decapsulated $((r2 - r1)) packets of the 6 new flows"
wait
