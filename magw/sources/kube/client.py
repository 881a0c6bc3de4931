"""Connecting to a Kubernetes API: a kubeconfig file, else the in-cluster service account, else a clear error.

``api_client()`` returns kubernetes-asyncio's ``ApiClient``, the object every typed API (CoreV1Api,
CustomObjectsApi, ...) and ``watch.Watch`` use. Each call builds its own ``Configuration``, so one process can
talk to two API servers at once (the local cluster's and the broker's) without touching the library's global
default.

A kubeconfig cluster whose ``server`` is ``unix:///abs/path.sock`` is our emulator (``magw.kubeemu``) in tests
and the lab: kubernetes-asyncio only knows TCP (its ``RESTClientObject`` builds an ``aiohttp.ClientSession``
on a ``TCPConnector`` as ``pool_manager``), so for such a server the URL becomes ``http://localhost`` and the
session is replaced by one on an ``aiohttp.UnixConnector`` for that path. Nothing else changes: requests,
watches and errors go through the library's own code.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from kubernetes_asyncio import config
from kubernetes_asyncio.client import ApiClient, Configuration
from kubernetes_asyncio.config.config_exception import ConfigException

from magw.sources.file.atomic import write_atomic

UNIX_PREFIX = "unix://"
IN_CLUSTER_ENV = "KUBERNETES_SERVICE_HOST"
# The read buffer kubernetes-asyncio gives its own session: watch events of large objects exceed aiohttp's default.
_READ_BUFSIZE = 2**21

# The client logs every response body at debug, and a TokenReview's body carries the token it reviewed (found by
# tests/unit/daemons/test_egress_api_auth.py): never below info, whatever the daemon's --log-level.
logging.getLogger("kubernetes_asyncio.client.rest").setLevel(logging.INFO)


class KubeConfigError(ValueError):
    """No usable connection settings; ``str()`` is one line that says what to give."""


async def api_client(kubeconfig: str | os.PathLike[str] | None = None, *, context: str | None = None) -> ApiClient:
    """An ``ApiClient`` for ``kubeconfig`` (its ``context``, default the current one), or the in-cluster config
    when no file is given and ``KUBERNETES_SERVICE_HOST`` is set. The caller closes it (``await c.close()``)."""
    configuration = Configuration()
    if kubeconfig is not None:
        path = os.fspath(kubeconfig)
        if not os.path.isfile(path):
            raise KubeConfigError(f"kubeconfig {path}: no such file")
        try:
            await config.load_kube_config(
                config_file=path, context=context, client_configuration=configuration, persist_config=False
            )
        except (ConfigException, OSError, ValueError, KeyError, TypeError, yaml.YAMLError) as err:
            detail = " ".join(str(err).split()) or type(err).__name__
            raise KubeConfigError(f"kubeconfig {path}: {detail}") from None
    elif os.environ.get(IN_CLUSTER_ENV):
        try:
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except (ConfigException, OSError) as err:
            detail = " ".join(str(err).split()) or type(err).__name__
            raise KubeConfigError(f"in-cluster config: {detail}") from None
    else:
        raise KubeConfigError(
            f"no Kubernetes API to talk to: give a kubeconfig file, or run in a pod ({IN_CLUSTER_ENV} is not set)"
        )
    return await client_for(configuration)


async def client_for(configuration: Any) -> ApiClient:
    """An ``ApiClient`` for a loaded ``Configuration``, over a unix socket when its host is ``unix://PATH``."""
    host = str(configuration.host)
    if not host.startswith(UNIX_PREFIX):
        return ApiClient(configuration=configuration)
    socket_path = host[len(UNIX_PREFIX) :]
    if not socket_path.startswith("/"):
        raise KubeConfigError(f"server {host}: a unix socket server must be an absolute path (unix:///path.sock)")
    configuration.host = "http://localhost"
    client = ApiClient(configuration=configuration)
    tcp_session = client.rest_client.pool_manager
    client.rest_client.pool_manager = aiohttp.ClientSession(
        connector=aiohttp.UnixConnector(path=socket_path),
        trust_env=False,  # a proxy from the environment must not capture http://localhost
        read_bufsize=_READ_BUFSIZE,
    )
    await tcp_session.close()
    return client


def kubeconfig_text(server: str, namespace: str = "default", *, name: str = "magw") -> str:
    """A kubeconfig with one cluster (``server``: ``unix:///abs.sock`` or a URL), no credentials, one context."""
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": server}}],
        "users": [{"name": name, "user": {}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name, "namespace": namespace}}],
        "current-context": name,
        "preferences": {},
    }
    return yaml.safe_dump(doc, sort_keys=False)


def write_kubeconfig(
    path: str | os.PathLike[str], server: str, namespace: str = "default", *, name: str = "magw"
) -> Path:
    """Write ``kubeconfig_text`` to ``path`` atomically (tests and the lab point daemons at an emulator)."""
    target = Path(path)
    write_atomic(target, kubeconfig_text(server, namespace, name=name))
    return target
