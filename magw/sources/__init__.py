"""State feeds: the file broker (standalone, lab). A Kubernetes source may join later."""

from magw.sources.file.broker import FileBroker, endpoint_path, publish_endpoint, render_endpoint, withdraw_endpoint

__all__ = ["FileBroker", "endpoint_path", "publish_endpoint", "render_endpoint", "withdraw_endpoint"]
