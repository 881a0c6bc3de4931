"""Which magw the lab's daemons run: the installed one, or another source tree (``--daemons-from DIR``).

How a daemon is spawned: the console script of this installation (``<venv>/bin/magw-route-agent`` and so on,
next to the running interpreter), so the same venv and Python. With a build DIR the process gets
``PYTHONPATH=DIR``: Python's path finder looks there before the installed magw (an editable install's finder
sits after it on ``sys.meta_path``, a regular install's site-packages after ``PYTHONPATH`` on ``sys.path``), so
every ``magw`` module, and the daemon's entry point, comes from DIR. The build is recorded per process in the
lab's state (``ProcRecord.build``), and ``magw lab status`` shows it.

``check_tree`` refuses, in one line, a DIR that is not a magw source tree or whose daemons would not run here:
no ``magw/__init__.py``, a ``pyproject.toml`` of another project, an entry point of a daemon that differs from
the installed console script's (the script would call a function DIR does not have), or an import that fails
with DIR first on the path (run once, with this interpreter).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from magw.lab.errors import LabInputError

# The console scripts the lab runs as daemons (magw.lab.planes.daemons, egressgw_daemons).
DAEMON_SCRIPTS = ("magw-route-agent", "magw-gateway", "magw-globalnet", "magw-egress", "magw-egress-agent")
CHECK_TIMEOUT = 60.0


def installed_tree() -> str:
    """The source tree (or site-packages) the installed magw is imported from."""
    import magw

    return str(Path(magw.__file__).resolve().parent.parent)


def describe(build: str) -> str:
    """A record's build in words: its tree, or the installed one's."""
    return build if build else f"{installed_tree()} (installed)"


def _installed_entry_points() -> dict[str, str]:
    try:
        eps = metadata.distribution("magw").entry_points
    except metadata.PackageNotFoundError:
        return {}
    return {ep.name: ep.value for ep in eps if ep.group == "console_scripts"}


def check_tree(path: str | Path) -> str:
    """The absolute path of source tree ``path`` once it passed the checks above; LabInputError (one line) if not."""
    tree = Path(path).resolve()
    what = f"--daemons-from/--to {path}"
    if not (tree / "magw" / "__init__.py").is_file():
        raise LabInputError(f"{what}: not a magw source tree (no magw/__init__.py there)")
    try:
        project = tomllib.loads((tree / "pyproject.toml").read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise LabInputError(f"{what}: not a magw source tree (pyproject.toml: {exc})") from None
    if project.get("project", {}).get("name") != "magw":
        raise LabInputError(f"{what}: pyproject.toml is not magw's")
    theirs = project.get("project", {}).get("scripts", {})
    ours = _installed_entry_points()
    for name in DAEMON_SCRIPTS:
        if theirs.get(name) != ours.get(name):
            raise LabInputError(
                f"{what}: its {name} entry point is {theirs.get(name)!r}, the installed console script calls "
                f"{ours.get(name)!r}: run the lab with that tree installed instead"
            )
    modules = sorted({str(theirs[n]).split(":")[0] for n in DAEMON_SCRIPTS})
    code = "import magw, " + ", ".join(modules) + "; print(magw.__file__)"
    env = {**os.environ, "PYTHONPATH": str(tree)}
    try:
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, cwd=tree, capture_output=True, text=True, timeout=CHECK_TIMEOUT
        )
    except subprocess.TimeoutExpired:
        raise LabInputError(f"{what}: importing its daemons took more than {CHECK_TIMEOUT:g} s") from None
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise LabInputError(f"{what}: its daemons do not import with {sys.executable}: {last}")
    imported = Path(out.stdout.strip()).resolve()
    if not imported.is_relative_to(tree):
        raise LabInputError(f"{what}: with PYTHONPATH={tree}, magw still came from {imported}")
    return str(tree)


def has_flag(build: str, main: str, marker: str) -> bool:
    """Whether build ``build``'s daemon ``main`` (``gateway``: ``magw/daemons/gateway/main.py``) mentions
    ``marker`` (a flag, or the helper that adds it), so a lab started from an older build gives it only the flags
    it knows."""
    tree = Path(build) if build else Path(installed_tree())
    try:
        return marker in (tree / "magw" / "daemons" / main / "main.py").read_text()
    except OSError:
        return False


def gateway_holds(build: str) -> bool:
    """Whether build ``build``'s gateway has ``--exit-hold`` (magw-gateway dates its kept Endpoint ahead)."""
    return has_flag(build, "gateway", "--exit-hold")


def metrics_flags(build: str, daemon: str, port: int) -> tuple[str, ...]:
    """``--metrics-port PORT`` when ``build``'s ``daemon`` (its package under magw/daemons) has it (its parser
    calls ``add_metrics_argument``, magw.daemons.common.flags)."""
    return ("--metrics-port", str(port)) if has_flag(build, daemon, "add_metrics_argument(") else ()
