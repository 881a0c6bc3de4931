"""magw.cli.pyroute2_light: the CLI imports pyroute2's modules without the package's __init__, and loses
nothing.

Each check runs in a fresh interpreter: this test process imported pyroute2 long ago.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

PUBLIC_NAMES = "sorted(n for n in vars(pyroute2) if not n.startswith('_'))"


def _run(code: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120, check=True
    )
    result: dict[str, object] = json.loads(out.stdout.splitlines()[-1])
    return result


def test_the_driver_imports_without_the_rest_of_the_library_and_every_name_comes_later() -> None:
    got = _run(
        f"""
        import json, sys
        from magw.cli import pyroute2_light
        installed = pyroute2_light.install()
        import magw.drivers.netlink.driver
        from pyroute2 import config  # a submodule: must not run the package's __init__
        before = sorted(m for m in sys.modules if m.startswith("pyroute2.ipdb") or m.startswith("pyroute2.ndb"))
        import logging
        null_handler = any(isinstance(h, logging.NullHandler) for h in logging.getLogger("pyroute2").handlers)
        import pyroute2, pyroute2.iproute
        from pyroute2 import IPRoute, NDB
        print(json.dumps({{
            "installed": installed,
            "before": before,
            "after": "pyroute2.ipdb" in sys.modules and "pyroute2.ndb.main" in sys.modules,
            "same_class": IPRoute is pyroute2.iproute.IPRoute,
            "driver_class": magw.drivers.netlink.session.IPRoute is IPRoute,
            "version": pyroute2.__version__,
            "hook_left": "__getattr__" in vars(pyroute2),
            "null_handler": null_handler,
            "names": {PUBLIC_NAMES},
        }}))
        """
    )
    plain = _run(
        f"""
        import json
        import pyroute2
        print(json.dumps({{"version": pyroute2.__version__, "names": {PUBLIC_NAMES}}}))
        """
    )
    assert got["installed"] is True
    assert got["before"] == []
    assert got["after"] is True
    assert got["same_class"] is True and got["driver_class"] is True
    assert got["version"] == plain["version"]
    assert got["hook_left"] is False
    assert got["null_handler"] is True
    assert got["names"] == plain["names"]


def test_an_imported_pyroute2_is_left_alone() -> None:
    got = _run(
        """
        import json, sys
        import pyroute2
        from magw.cli import pyroute2_light
        module = sys.modules["pyroute2"]
        print(json.dumps({"installed": pyroute2_light.install(), "same": sys.modules["pyroute2"] is module}))
        """
    )
    assert got == {"installed": False, "same": True}


def test_the_console_entry_point_installs_it_and_an_in_process_call_does_not() -> None:
    got = _run(
        """
        import json, sys
        from magw.cli.main import main
        main(["--version"])
        in_process = "pyroute2" in sys.modules
        sys.argv = ["magw", "--version"]
        main()
        print(json.dumps({"in_process": in_process, "hook": "__getattr__" in vars(sys.modules["pyroute2"])}))
        """
    )
    assert got == {"in_process": False, "hook": True}
