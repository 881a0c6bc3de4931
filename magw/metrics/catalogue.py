"""Every metric the daemons export, with its type, labels and exporter: the one list docs/metrics.md, the
Grafana dashboard (deploy/grafana/magw.json) and the tests are checked against. Pure."""

from __future__ import annotations

import attrs


@attrs.frozen
class Metric:
    name: str
    kind: str  # "gauge", "counter" or "histogram" (as the exposition's TYPE line says)
    labels: tuple[str, ...]
    daemon: str  # "route-agent", "gateway", "globalnet", "egress" (the egress gateway controller)
    help: str


# Submariner's connection labels (pkg/cable/metrics.go): the connection's two ends.
CONNECTION = ("cable_driver", "local_cluster", "local_hostname", "local_endpoint_ip", "remote_cluster",
              "remote_hostname", "remote_endpoint_ip")  # fmt: skip

CATALOGUE: tuple[Metric, ...] = (
    # --- Submariner's names (the route agent on every node; connections only on active gateways) ---
    Metric("submariner_gateways", "gauge", ("local_cluster",), "route-agent",
           "Gateways the local cluster publishes (Endpoints)."),
    Metric("submariner_connections", "gauge", (*CONNECTION, "status"), "route-agent",
           "1 per connection from this gateway to a remote gateway; status connected, connecting or error."),
    Metric("submariner_connection_latency_seconds", "gauge", CONNECTION, "route-agent",
           "Round-trip time of the connection's last answered probe."),
    Metric("submariner_connection_established_timestamp", "gauge", CONNECTION, "route-agent",
           "Unix time the connection last became connected (absent while it is not)."),
    Metric("submariner_gateway_rx_bytes", "gauge", CONNECTION, "route-agent",
           "Bytes received from the remote gateway over the WireGuard cable (as of the last cable check)."),
    Metric("submariner_gateway_tx_bytes", "gauge", CONNECTION, "route-agent",
           "Bytes sent to the remote gateway over the WireGuard cable (as of the last cable check)."),
    Metric("submariner_global_IP_availability", "gauge", ("cidr",), "globalnet",
           "Global IPs of the cluster's global CIDR still free."),
    Metric("submariner_global_IP_allocated", "gauge", ("cidr",), "globalnet",
           "Global IPs of the cluster's global CIDR held by any object."),
    Metric("submariner_global_egress_IP_allocated", "gauge", ("cidr",), "globalnet",
           "Global IPs held by GlobalEgressIPs (namespaces and pod selectors)."),
    Metric("submariner_cluster_global_egress_IP_allocated", "gauge", ("cidr",), "globalnet",
           "Global IPs held by ClusterGlobalEgressIPs (the cluster's egress addresses)."),
    Metric("submariner_global_ingress_IP_allocated", "gauge", ("cidr",), "globalnet",
           "Global IPs held by GlobalIngressIPs (exported Services and their pods)."),
    # --- magw's own ---
    Metric("magw_probe_rtt_seconds", "histogram", ("peer", "peer_cluster"), "route-agent",
           "Round-trip time of each answered alive probe, per probed gateway."),
    Metric("magw_path_up", "gauge", ("peer", "peer_cluster"), "route-agent",
           "1 while this node's probes say the gateway is up, 0 when down (absent: not decided yet)."),
    Metric("magw_fail_static_clusters", "gauge", (), "route-agent",
           "Remote clusters this node plans by fail static: every gateway toward them down, all kept (alert on > 0)."),
    Metric("magw_failovers_total", "counter", ("peer", "peer_cluster", "what"), "route-agent",
           "Times a probed gateway was called down (what: alive, or the remote cluster it lost)."),
    Metric("magw_failover_detection_seconds", "histogram", ("peer_cluster",), "route-agent",
           "Seconds from a gateway's last answered probe to calling it down."),
    Metric("magw_nexthop_group_replaces_total", "counter", (), "route-agent",
           "Nexthop groups created or replaced in the kernel."),
    Metric("magw_nexthop_group_sync_seconds", "histogram", ("mode",), "route-agent",
           "Time of each sync (plan, diff, apply) that changed nexthop groups: an event's way to the kernel "
           "(`mode`: `partial`, `full`, or `shortcut` for a dead gateway's replaces applied before the sync)."),
    Metric("magw_gateway_flows", "gauge", ("remote_cluster",), "route-agent",
           "On a gateway: tracked connections with an end in the remote cluster's CIDRs (the flows it carries)."),
    Metric("magw_reconciler_sync_duration_seconds", "histogram", ("reconciler", "mode"), "route-agent",
           "Time of one sync (plan, observe if full, diff, apply); mode full or partial."),
    Metric("magw_reconciler_syncs_total", "counter", ("reconciler", "mode"), "route-agent", "Syncs run."),
    Metric("magw_reconciler_changes_total", "counter", ("reconciler", "kind", "verb"), "route-agent",
           "Operations applied successfully, by object kind and verb (create, replace, delete)."),
    Metric("magw_reconciler_errors_total", "counter", ("reconciler", "kind"), "route-agent",
           "Failed operations by object kind; kind=sync for a sync that raised, plan for a plan that did."),
    Metric("magw_reconciler_objects", "gauge", ("reconciler", "kind"), "route-agent",
           "Objects we own, as known after the last sync."),
    Metric("magw_reconciler_skipped_total", "counter", ("reconciler", "reason"), "route-agent",
           "Operations left out of a sync (reason backoff, or prune_deferred)."),
    Metric("magw_gateway_publications_total", "counter", ("reason",), "gateway", "Endpoint documents written."),
    Metric("magw_gateway_endpoint_published", "gauge", (), "gateway", "1 while our Endpoint document is in place."),
    Metric("magw_globalnet_allocations_total", "counter", (), "globalnet",
           "Global IPs newly given to an object (written into a status that did not hold them)."),
    Metric("magw_globalnet_leaks_found_total", "counter", (), "globalnet",
           "Statuses (and objects the controller made) whose owner is gone, removed: their IPs back to the pool."),
    Metric("magw_globalnet_waiting", "gauge", (), "globalnet",
           "Objects waiting for global IPs (pool exhausted, or a status file unreadable)."),
    Metric("magw_egress_vip_holder_changes_total", "counter", ("vip",), "egress",
           "Times an egress VIP's recorded holder changed."),
    Metric("magw_egress_vip_holder_change_seconds", "histogram", ("vip",), "egress",
           "Seconds a VIP had no holder: from the old holder's report that it left to the new holder's report."),
)  # fmt: skip


BY_NAME = {m.name: m for m in CATALOGUE}


def of(daemon: str) -> tuple[Metric, ...]:
    return tuple(m for m in CATALOGUE if m.daemon == daemon)
