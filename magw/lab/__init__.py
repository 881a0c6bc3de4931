"""``magw lab``: a whole clusterset in network namespaces (see docs/lab.md).

Kept free of imports: ``python -m magw.lab.payload.traffic`` runs inside every pod and
should start fast.
"""
