#!/bin/bash
P=${P:-egx$$}; E=$(dirname "$0")/../../tests/support/dataplane_echo.py; ne(){ ip netns exec "$@"; }
ne $P-out timeout 60 python3 $E tcp-server 192.168.77.200 9000 --seconds 50 --max 1000 > ${OUT:-/tmp}/egx-tcp.log 2>&1 &
ne $P-out timeout 60 python3 $E udp-server 192.168.77.200 9001 --seconds 50 --max 1000 > ${OUT:-/tmp}/egx-udp.log 2>&1 &
ne $P-pb timeout 60 python3 $E tcp-server 0.0.0.0 8080 --seconds 50 --max 1000 > ${OUT:-/tmp}/egx-btcp.log 2>&1 &
ne $P-pb timeout 60 python3 $E udp-server 0.0.0.0 8080 --seconds 50 --max 1000 > ${OUT:-/tmp}/egx-budp.log 2>&1 &
sleep 0.5
c() { echo "$1 $2 -> $3:$4: $(ne $P-$1 timeout 10 python3 $E $2-client $3 $4 --count 2 --timeout 1)"; }
for p in pa pu pl pb; do c $p tcp 192.168.77.200 9000; c $p udp 192.168.77.200 9001; done
c out tcp 192.168.77.101 80; c out udp 192.168.77.101 80
c pa tcp 192.168.77.101 80; c pl udp 192.168.77.101 80
c pu tcp 192.168.77.101 80; c pu udp 192.168.77.101 80
c pa tcp 10.9.3.10 8080; c pa udp 10.9.3.10 8080
kill %1 %2 %3 %4 2>/dev/null
