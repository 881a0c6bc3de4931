from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from tests.netns import can_use_netns, netns

# No deadlines: these machines are shared and timing is noisy. CI runs a fixed, modest number of examples.
settings.register_profile("default", deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", deadline=None, max_examples=1000, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("MAGW_HYPOTHESIS_PROFILE", "default"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if can_use_netns():
        return
    skip = pytest.mark.skip(reason="needs root and network namespaces (kernel tests)")
    for item in items:
        if "kernel" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def ns() -> Iterator[str]:
    """A fresh network namespace, removed after the test whatever happens."""
    with netns() as name:
        yield name


@pytest.fixture
def ns_factory() -> Iterator[object]:
    """Create several namespaces in one test: ``name = ns_factory()``; all are removed afterwards."""
    import contextlib

    with contextlib.ExitStack() as stack:
        yield lambda prefix="magwt": stack.enter_context(netns(prefix))
