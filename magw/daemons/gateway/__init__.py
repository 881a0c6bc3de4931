"""``magw-gateway``: publishes this gateway node's Endpoint (file broker document or Kubernetes object).
docs/daemons.md."""
