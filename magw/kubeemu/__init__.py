"""A Kubernetes API server emulator for tests and the lab. NOT for production (see docs/kubeemu.md).

No Kubernetes API server can be installed on these machines, so magw's Kubernetes source is tested against
this aiohttp server, which implements the API's list/watch semantics faithfully enough for a real client
(kubernetes-asyncio) to behave as it would against a real server: one global resourceVersion, watches from a
resourceVersion with bookmarks and 410 after compaction, optimistic concurrency, merge and JSON patches,
status subresources, label and field selectors, and faults on demand.
"""

from magw.kubeemu.resources import DEFAULT_TYPES, ResourceType, from_crd
from magw.kubeemu.server import Emulator

__all__ = ["DEFAULT_TYPES", "Emulator", "ResourceType", "from_crd"]
