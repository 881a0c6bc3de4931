"""Shared fixtures, the hypothesis profiles, and the CI guard against silently skipped kernel tests.

``MAGW_REQUIRE_KERNEL_TESTS=1`` (set by ``.ci/run``): any skip of a ``kernel``-marked test, or of a
test in a lab module (``test_lab_*.py``, also a whole module skipped at collection), fails the run
(but a ``wireguard_backend("kernel")`` case, which skips where the kernel has no WireGuard module),
and the terminal summary names each one with its reason. Other skips (e.g. a missing libyaml) and
xfails do not count. Unset, skips are reported as usual, so a developer without root can run the suite.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.support import log_streams
from tests.support.broker_docs import BrokerDocuments, broker_document
from tests.support.cli import MagwCli
from tests.support.daemon_procs import Daemon
from tests.support.netns import NsFactory, VethPair, can_use_netns, netns, veth_between
from tests.support.ovn_fixture import ovn_dbs  # noqa: F401  # the fixture, for every test module

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
def ns_factory() -> Iterator[NsFactory]:
    """Create several namespaces in one test: ``name = ns_factory()`` or ``ns_factory("magwt-gw")``; all are
    removed afterwards, also when the test fails."""
    factory = NsFactory()
    try:
        yield factory
    finally:
        factory.close()


@pytest.fixture
def veth_pair(ns_factory: NsFactory) -> VethPair:
    """Two fresh namespaces joined by a veth (``v0`` in ``a``, ``v1`` in ``b``, both up, no addresses); the
    namespaces, and the veth with them, are removed after the test."""
    return veth_between(ns_factory(), ns_factory())


@pytest.fixture(scope="session")
def magw_cli() -> MagwCli:
    """Run the magw CLI in a new process: ``magw_cli("plan", ...)`` is the finished process (tests/support/cli.py)."""
    return MagwCli()


@pytest.fixture(scope="session")
def broker_documents() -> BrokerDocuments:
    """The broker documents of tests/data/broker/ by file name: ``broker_documents("egress-east.yaml")``."""
    return broker_document


@pytest.fixture
def daemons() -> Iterator[Callable[..., Daemon]]:
    """Start daemon processes: ``daemons("route_agent", *args, netns=ns)``; each is killed after the test."""
    started: list[Daemon] = []

    def start(daemon: str, *args: str, netns: str | None = None) -> Daemon:
        d = Daemon(daemon, *args, netns=netns)
        started.append(d)
        return d

    yield start
    for d in started:
        d.kill()


REQUIRE_KERNEL_ENV = "MAGW_REQUIRE_KERNEL_TESTS"


def _lab_module(nodeid: str) -> bool:
    return Path(nodeid.split("::")[0]).name.startswith("test_lab_")


def _skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


class KernelSkipGuard:
    """Records skips of kernel- or ovn-marked tests and of lab modules; a run with any of them fails."""

    def __init__(self) -> None:
        self.skipped: list[str] = []

    def _record(self, report: pytest.TestReport | pytest.CollectReport) -> None:
        self.skipped.append(f"{report.nodeid}: {_skip_reason(report)}")

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        ours = "kernel" in report.keywords or "ovn" in report.keywords or _lab_module(report.nodeid)
        # The kernel WireGuard backend's cases may skip where the module is missing (these machines): the
        # WireguardBackends summary counts them instead.
        may_skip = "wgbackend=kernel" in report.keywords
        if ours and not may_skip and report.skipped and not hasattr(report, "wasxfail"):
            self._record(report)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.skipped and _lab_module(report.nodeid):
            self._record(report)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.skipped and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.skipped:
            return
        terminalreporter.section(f"{REQUIRE_KERNEL_ENV}: kernel tests skipped", sep="=", red=True, bold=True)
        for line in self.skipped:
            terminalreporter.write_line(f"SKIPPED (not allowed) {line}")
        terminalreporter.write_line(
            f"{REQUIRE_KERNEL_ENV}=1: {len(self.skipped)} kernel or lab test(s) skipped; the run fails", red=True
        )


class WireguardBackends:
    """Counts the WireGuard driver's cases per backend (``wireguard_backend`` marker) and says in the summary how
    many ran and why the others skipped: the kernel backend's skip where the module is missing (these machines),
    so CI shows that they did not run instead of hiding it."""

    def __init__(self) -> None:
        self.outcomes: dict[str, dict[str, int]] = {}
        self.reasons: dict[str, set[str]] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        backend = next((k.removeprefix("wgbackend=") for k in report.keywords if k.startswith("wgbackend=")), None)
        if backend is None or (report.when != "call" and not report.skipped):
            return
        outcome = "skipped" if report.skipped else "ran"
        counts = self.outcomes.setdefault(backend, {"ran": 0, "skipped": 0})
        counts[outcome] += 1
        if report.skipped:
            self.reasons.setdefault(backend, set()).add(_skip_reason(report))

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.outcomes:
            return
        terminalreporter.section("WireGuard driver backends", sep="-")
        for backend in sorted(self.outcomes):
            counts = self.outcomes[backend]
            why = "; ".join(sorted(self.reasons.get(backend, ())))
            terminalreporter.write_line(
                f"{backend}: {counts['ran']} ran, {counts['skipped']} skipped" + (f" ({why})" if why else "")
            )


def pytest_itemcollected(item: pytest.Item) -> None:
    """A ``wireguard_backend(name)`` case gets the keyword ``wgbackend=<name>``, which reports carry."""
    marker = item.get_closest_marker("wireguard_backend")
    if marker is not None and marker.args:
        item.keywords[f"wgbackend={marker.args[0]}"] = True


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(WireguardBackends(), "magw-wireguard-backends")
    if os.environ.get(REQUIRE_KERNEL_ENV, "") not in ("", "0"):
        config.pluginmanager.register(KernelSkipGuard(), "magw-kernel-skip-guard")


_LOGGING_AT_START = log_streams.saved()


@pytest.fixture(autouse=True)
def _logging_as_the_session_started() -> Iterator[None]:
    """See tests/support/log_streams.py: no test inherits another's logging level or (closed) stream."""
    log_streams.restore(_LOGGING_AT_START)
    yield
    log_streams.restore(_LOGGING_AT_START)
