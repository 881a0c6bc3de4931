"""``magw verify``: the connectivity suite, the hop where a failing pair dies, and ``--failover`` (docs/verify.md)."""
