"""Start-up: let the CLI import pyroute2's modules without running the package's ``__init__`` first.

pyroute2 0.9.7's ``pyroute2/__init__.py`` imports its whole library (IPDB, NDB, conntrack, ipset, wireguard,
nl80211, plan9, ...) to offer every class at the top level. ``magw apply`` needs ``IPRoute`` and the
netlink message classes only; the rest cost about 90 ms of its start-up (docs/performance.md, measured with
``python -X importtime``: 0.51 -> 0.40 s to import the apply command, medians of 8 side by side).

:func:`install` puts an empty ``pyroute2`` package module into ``sys.modules``, created from the package's
own import spec (same ``__path__``, ``__file__``, loader), so ``import pyroute2.iproute`` loads that
subpackage and what it imports, nothing else. The first time anything asks the package for a name that
is not one of its submodules (``from pyroute2 import NDB``, ``pyroute2.__version__``), the module runs the
real ``__init__`` into itself and answers from it (PEP 562's module ``__getattr__``): every name
pyroute2 offers is still there for whoever asks, only later.

It does nothing when pyroute2 was already imported, or when its spec is not an ordinary package (then
the normal import runs). Only the CLI's entry point calls it; a program that imports the library gets
pyroute2's own import.
"""

from __future__ import annotations

import importlib.util
import sys
from importlib.machinery import ModuleSpec
from types import ModuleType

PACKAGE = "pyroute2"


class _Complete:
    """The package module's ``__getattr__``: run the real ``__init__`` once, then answer from it."""

    def __init__(self, module: ModuleType, spec: ModuleSpec) -> None:
        self._module = module
        self._spec = spec

    def __call__(self, name: str) -> object:
        module = self._module
        if importlib.util.find_spec(f"{module.__name__}.{name}") is not None:
            # A submodule not loaded yet: ``from pyroute2 import config`` asks with hasattr() first,
            # then imports ``pyroute2.config`` itself when the attribute is missing.
            raise AttributeError(name)
        vars(module).pop("__getattr__", None)  # before running __init__: its own imports must not come back here
        assert self._spec.loader is not None  # checked by install()
        self._spec.loader.exec_module(module)
        return getattr(module, name)


def install() -> bool:
    """Put the deferred ``pyroute2`` package in place; True when it was put in place, False when not."""
    if PACKAGE in sys.modules:
        return False
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return False
    if not hasattr(spec.loader, "exec_module"):
        return False
    module = importlib.util.module_from_spec(spec)
    module.__getattr__ = _Complete(module, spec)  # type: ignore[method-assign]
    sys.modules[PACKAGE] = module
    # What the package's __init__ does first: give the "pyroute2" logger its NullHandler, so a module's warning
    # at import (tcmsg's "the tc subsystem functionality is limited" when /proc is hidden) is not printed on
    # stderr by logging's last-resort handler.
    importlib.import_module(f"{PACKAGE}.config.log")
    return True
