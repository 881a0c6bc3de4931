"""State feeds: the file broker (``file/``: standalone, lab) and the Kubernetes source (``kube/``); docs/glossary.md."""

from magw.sources.file.broker import FileBroker
from magw.sources.file.endpoint_files import endpoint_path, publish_endpoint, render_endpoint, withdraw_endpoint

__all__ = ["FileBroker", "endpoint_path", "publish_endpoint", "render_endpoint", "withdraw_endpoint"]
