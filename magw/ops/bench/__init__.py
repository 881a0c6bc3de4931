"""``magw benchmark``: throughput (iperf3) and request/response latency between clusters (docs/benchmark.md)."""
