#!/bin/bash
# Build: P=prefix. Underlay bridge in $P-sw; nodes n1..n3; outside server ns; pods.
set -e
P=${P:-egx$$}
ne() { ip netns exec "$@"; }
ip netns add $P-sw; ne $P-sw ip link set lo up
ne $P-sw ip link add br0 type bridge; ne $P-sw ip link set br0 up
attach() { # ns ifname addr
  ip link add $1-u type veth peer name eth0 netns $1 2>/dev/null || ip link add "u$RANDOM" type veth peer name eth0 netns $1
}
for i in 1 2 3; do
  n=$P-n$i; ip netns add $n; ne $n ip link set lo up
  ip -n $P-sw link add u$i type veth peer name eth0 netns $n
  ne $P-sw ip link set u$i master br0 up
  ne $n ip addr add 192.168.77.$i/24 dev eth0; ne $n ip link set eth0 up
  ne $n sysctl -qw net.ipv4.ip_forward=1
  for j in 1 2 3; do [ $i = $j ] || ne $n ip route add 10.9.$j.0/24 via 192.168.77.$j; done
done
ip netns add $P-out; ne $P-out ip link set lo up
ip -n $P-sw link add uo type veth peer name eth0 netns $P-out
ne $P-sw ip link set uo master br0 up
ne $P-out ip addr add 192.168.77.200/24 dev eth0; ne $P-out ip link set eth0 up
pod() { # name node-index ip
  local p=$P-$1 n=$P-n$2
  ip netns add $p; ne $p ip link set lo up
  ip -n $n link add v$1 type veth peer name eth0 netns $p
  ne $n ip addr add 169.254.1.1/32 dev v$1; ne $n ip link set v$1 up
  ne $n ip route add $3/32 dev v$1
  ne $p ip addr add $3/32 dev eth0; ne $p ip link set eth0 up
  ne $p ip route add 169.254.1.1 dev eth0; ne $p ip route add default via 169.254.1.1 dev eth0
}
pod pa 2 10.9.2.10   # bound to VIP A, on a non-candidate
pod pu 2 10.9.2.11   # unbound
pod pl 1 10.9.1.10   # bound to VIP A, on the first holder
pod pb 3 10.9.3.10   # bound to VIP B (backend)
for i in 1 2 3; do
ne $P-n$i nft -f - <<NFT
table ip lab-cni {
  chain postrouting {
    type nat hook postrouting priority srcnat; policy accept;
    ip saddr 10.9.0.0/16 ip daddr != { 10.9.0.0/16, 10.96.0.0/16 } masquerade
  }
}
NFT
done
echo built
