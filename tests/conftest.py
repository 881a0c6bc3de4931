from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.netns import can_use_netns, netns


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
