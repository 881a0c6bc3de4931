"""The CI guard of tests/conftest.py: with MAGW_REQUIRE_KERNEL_TESTS=1 a skipped kernel or lab test fails the run.

Each case runs an inner pytest session (pytester) over a few throwaway test files, with
this repository's own tests/conftest.py as the inner conftest, and reads its exit code
and terminal output.
"""

from __future__ import annotations

import pytest

from tests.support.paths import TESTS

pytest_plugins = ["pytester"]

CONFTEST = TESTS / "conftest.py"
ENV = "MAGW_REQUIRE_KERNEL_TESTS"

KERNEL_SKIPS = """
import pytest

@pytest.mark.kernel
def test_needs_a_tool():
    pytest.skip("no such tool here")

@pytest.mark.kernel
def test_runs():
    assert True
"""

OTHER_SKIPS = """
import pytest

def test_optional_library():
    pytest.skip("PyYAML built without libyaml")

@pytest.mark.skipif(True, reason="not on this platform")
def test_platform():
    pass

@pytest.mark.kernel
@pytest.mark.xfail(reason="known kernel bug", strict=True)
def test_known_bug():
    assert False

def test_runs():
    assert True
"""

LAB_MODULE_SKIPIF = """
import pytest

pytestmark = pytest.mark.skipif(True, reason="daemons are not installed")

def test_lab_e2e():
    pass
"""

LAB_MODULE_SKIPPED_AT_COLLECTION = """
import pytest

pytest.skip("the lab needs iperf3", allow_module_level=True)

def test_lab_traffic():
    pass
"""


def _session(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, value: str | None) -> pytest.RunResult:
    pytester.makeconftest(CONFTEST.read_text())
    pytester.makeini("[pytest]\nmarkers =\n    kernel: needs root\nasyncio_default_fixture_loop_scope = function\n")
    if value is None:
        monkeypatch.delenv(ENV, raising=False)
    else:
        monkeypatch.setenv(ENV, value)
    return pytester.runpytest_inprocess("-p", "no:cacheprovider")


def test_kernel_skip_fails_the_run_when_required(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel-marked test that skips makes the run exit 1, and the summary names it with its reason."""
    pytester.makepyfile(test_kernel_thing=KERNEL_SKIPS)
    result = _session(pytester, monkeypatch, "1")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(
        [
            "SKIPPED (not allowed) test_kernel_thing.py::test_needs_a_tool: no such tool here",
            f"{ENV}=1: 1 kernel or lab test(s) skipped; the run fails",
        ]
    )


@pytest.mark.parametrize("value", [None, "", "0"])
def test_kernel_skip_is_allowed_when_not_required(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    """Without the variable (or with it empty or 0) the same skip is an ordinary skip: exit 0, no guard line."""
    pytester.makepyfile(test_kernel_thing=KERNEL_SKIPS)
    result = _session(pytester, monkeypatch, value)
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=1, skipped=1)
    assert ENV not in result.stdout.str()


def test_other_skips_and_xfails_do_not_trip_it(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Skips of tests that are neither kernel-marked nor in a lab module, and a kernel xfail, leave exit 0."""
    pytester.makepyfile(test_snapshot_scale=OTHER_SKIPS)
    result = _session(pytester, monkeypatch, "1")
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=1, skipped=2, xfailed=1)
    assert "not allowed" not in result.stdout.str()


@pytest.mark.parametrize(
    ("source", "reason"),
    [(LAB_MODULE_SKIPIF, "daemons are not installed"), (LAB_MODULE_SKIPPED_AT_COLLECTION, "the lab needs iperf3")],
)
def test_a_skipped_lab_module_fails_the_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, source: str, reason: str
) -> None:
    """A lab module (test_lab_*.py) skipped by a module-level skipif or at collection fails the run, even
    without the kernel marker."""
    pytester.makepyfile(test_lab_e2e=source)
    result = _session(pytester, monkeypatch, "1")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([f"SKIPPED (not allowed) test_lab_e2e.py*: {reason}"])


def test_a_real_failure_keeps_its_exit_code(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failing test and a kernel skip: exit 1 (failed) and the guard still lists the skip."""
    pytester.makepyfile(
        test_kernel_thing=KERNEL_SKIPS,
        test_broken="def test_broken():\n    assert 1 == 2\n",
    )
    result = _session(pytester, monkeypatch, "1")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=1, skipped=1, failed=1)
    result.stdout.fnmatch_lines(["SKIPPED (not allowed) test_kernel_thing.py::test_needs_a_tool: no such tool here"])


WIREGUARD_BACKENDS = """
import pytest

@pytest.mark.kernel
@pytest.mark.wireguard_backend("kernel")
def test_kernel_backend():
    pytest.skip("this kernel has no wireguard module")

@pytest.mark.kernel
@pytest.mark.wireguard_backend("userspace")
def test_userspace_backend():
    assert True

@pytest.mark.kernel
@pytest.mark.wireguard_backend("userspace")
def test_userspace_needs_a_tool():
    pytest.skip("wireguard-go is not installed")
"""


def test_the_kernel_wireguard_backend_may_skip_and_is_counted(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``wireguard_backend("kernel")`` case that skips (no module) does not fail the run; a userspace case that
    skips still does; the summary counts each backend's cases and says why they skipped."""
    pytester.makepyfile(test_wg=WIREGUARD_BACKENDS)
    pytester.makeconftest(CONFTEST.read_text())
    pytester.makeini(
        "[pytest]\nmarkers =\n    kernel: needs root\n    wireguard_backend(name): a backend\n"
        "asyncio_default_fixture_loop_scope = function\n"
    )
    monkeypatch.setenv(ENV, "1")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=1, skipped=2)
    out = result.stdout.str()
    assert "SKIPPED (not allowed) test_wg.py::test_userspace_needs_a_tool: wireguard-go is not installed" in out
    assert "not allowed) test_wg.py::test_kernel_backend" not in out
    result.stdout.fnmatch_lines(
        [
            f"{ENV}=1: 1 kernel or lab test(s) skipped; the run fails",
            "kernel: 0 ran, 1 skipped (this kernel has no wireguard module)",
            "userspace: 1 ran, 1 skipped (wireguard-go is not installed)",
        ]
    )
