"""magw: several active gateways per Kubernetes cluster, level-driven reconcilers."""

__version__ = "0.1.0"
