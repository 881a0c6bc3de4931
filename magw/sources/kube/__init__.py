"""The Kubernetes source (docs/kubernetes.md): Nodes, workloads and the submariner.io kinds through kubernetes-asyncio.

``client.api_client()`` connects (kubeconfig, in-cluster, or our emulator's unix socket); the other modules
list, watch, map and write. The API server emulator for tests and the lab is ``magw.kubeemu``.
"""
