#!/bin/bash
# Program the egress datapath by hand on n1..n3. VIP A .100 vrid 100 (0x64), VIP B .101 vrid 101 (0x65)
set -e
P=${P:-egx$$}
ne() { ip netns exec "$@"; }
for i in 1 2 3; do
  n=$P-n$i
  ne $n ip link add magw-egress type vxlan external gpe dstport 4801
  ne $n sysctl -qw net.ipv4.conf.magw-egress.rp_filter=2
  ne $n ip link set magw-egress mtu 1464 up
  ne $n ip route add default encap ip id 100 dst 192.168.77.100 dev magw-egress table 1100
  ne $n ip route add default encap ip id 101 dst 192.168.77.101 dev magw-egress table 1101
  ne $n ip rule add fwmark 0x1064/0x30ff lookup 1100 pref 1100
  ne $n ip rule add fwmark 0x1065/0x30ff lookup 1101 pref 1101
  ne $n nft -f - <<NFT
table ip magw-egress {
  set excluded { type ipv4_addr; flags interval; elements = { 10.9.0.0/16, 10.96.0.0/16, 169.254.0.0/16, 224.0.0.0/3, 192.168.77.1, 192.168.77.2, 192.168.77.3 } }
  set pods100 { type ipv4_addr; elements = { 10.9.2.10, 10.9.1.10 } }
  set pods101 { type ipv4_addr; elements = { 10.9.3.10 } }
  set bound { type ipv4_addr; elements = { 10.9.2.10, 10.9.1.10, 10.9.3.10 } }
  set vips { type ipv4_addr; elements = { 192.168.77.100, 192.168.77.101 } }
  chain prerouting-raw {
    type filter hook prerouting priority raw; policy accept;
    iifname "magw-egress" return
    fib daddr type local return
    ip daddr != @excluded ip saddr @pods100 meta mark set meta mark & 0xffffcf00 | 0x1064 notrack
    ip daddr != @excluded ip saddr @pods101 meta mark set meta mark & 0xffffcf00 | 0x1065 notrack
    ip saddr != @excluded ip daddr @bound notrack
  }
  chain prerouting-nat {
    type nat hook prerouting priority dstnat - 10; policy accept;
    ip daddr != @vips return
    fib daddr type != local return
    iifname "magw-egress" meta mark set meta mark & 0xffffcf00 | 0x3000
    ip saddr @excluded meta mark set meta mark & 0xffffcf00 | 0x3000
    meta mark & 0x3000 != 0x3000 meta mark set meta mark & 0xffffcf00 | 0x2000
    ip daddr 192.168.77.101 tcp dport 80 dnat to numgen random mod 1 map { 0 : 10.9.3.10 } : 8080
    ip daddr 192.168.77.101 udp dport 80 dnat to numgen random mod 1 map { 0 : 10.9.3.10 } : 8080
  }
  chain forward {
    type filter hook forward priority mangle; policy accept;
    oifname "magw-egress" meta mark set meta mark & 0xffffcf00
    oifname "magw-egress" tcp flags syn / syn,rst tcp option maxseg size set rt mtu
    meta mark & 0x3000 == 0x2000 tcp flags syn / syn,rst tcp option maxseg size set 1424
  }
  chain postrouting {
    type nat hook postrouting priority srcnat - 10; policy accept;
    meta mark & 0x3000 == 0x3000 ip saddr @pods100 snat to 192.168.77.100
    meta mark & 0x3000 == 0x3000 ip saddr @pods101 snat to 192.168.77.101
    meta mark & 0x3000 == 0x3000 snat to ct original ip daddr
    meta mark & 0x3000 == 0x2000 snat to ip saddr
    iifname "magw-egress" ip saddr @pods100 ip daddr != @excluded snat to 192.168.77.100
    iifname "magw-egress" ip saddr @pods101 ip daddr != @excluded snat to 192.168.77.101
  }
}
NFT
  ne $n ip addr add 169.254.240.1/32 dev magw-egress
done
ne $P-n1 ip addr add 192.168.77.100/32 dev eth0
ne $P-n1 ip addr add 192.168.77.101/32 dev eth0
echo programmed
