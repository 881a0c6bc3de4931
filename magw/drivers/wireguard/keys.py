"""A gateway's WireGuard key pair: made on first start, kept in a 0600 file, never logged.

The private key lives in ``<state-dir>/wireguard/private.key`` (mode 0600, directory 0700) and leaves that
file only into the device, by path (``wg set DEV private-key FILE``: never on a command line, where every
user could read it in /proc). The public key is derived from it with ``wg pubkey`` (the key on stdin) and
is all that is ever published or logged.

Both daemons of a gateway node call ``ensure_private_key``: the gateway daemon to publish the public key,
the route agent to configure the device. Creation is race-free: the key is written to a temporary file and
hard-linked to its name, which fails if the other daemon got there first (then its key is used).
``rotate`` replaces the key atomically (rename); the daemons notice the file's new identity.

A key file that others may read (group or world bits set), or that is not a regular file, is refused in one
line: a key that may have leaked must be replaced, not used.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import attrs

KEY_DIR = "wireguard"
KEY_FILE = "private.key"
WG = "wg"
_TIMEOUT = 5.0


class KeyFileError(RuntimeError):
    """A key file that cannot be made, read or trusted; ``str()`` is one line."""


@attrs.frozen
class KeyFile:
    """The private key's path and the identity of the file read (device, inode, mtime): a rotation changes it."""

    path: Path
    identity: tuple[int, int, int]


def key_path(state_dir: str | os.PathLike[str]) -> Path:
    return Path(state_dir) / KEY_DIR / KEY_FILE


def _run_wg(args: list[str], stdin: bytes | None = None) -> bytes:
    try:
        done = subprocess.run([WG, *args], input=stdin, capture_output=True, timeout=_TIMEOUT, check=False)
    except FileNotFoundError:
        raise KeyFileError("wg: not found (install wireguard-tools)") from None
    except subprocess.TimeoutExpired:
        raise KeyFileError(f"wg {args[0]}: no answer in {_TIMEOUT:g} s") from None
    if done.returncode != 0:
        raise KeyFileError(f"wg {args[0]}: {done.stderr.decode(errors='replace').strip() or 'failed'}")
    return done.stdout


def _check(path: Path) -> os.stat_result:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise KeyFileError(f"{path}: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise KeyFileError(f"{path}: not a regular file; refusing to use it as a private key")
    if st.st_mode & 0o077:
        raise KeyFileError(
            f"{path}: mode {stat.S_IMODE(st.st_mode):04o} lets others read the private key; "
            "refusing to use it (rotate it: magw cable rotate-key)"
        )
    if st.st_uid != os.geteuid():
        raise KeyFileError(f"{path}: owned by uid {st.st_uid}, not by us ({os.geteuid()}); refusing to use it")
    return st


def _write_new_key(directory: Path) -> Path:
    """A fresh private key in a temporary 0600 file of ``directory``; its path."""
    key = _run_wg(["genkey"])
    tmp = directory / f".{KEY_FILE}.{os.getpid()}.{os.urandom(4).hex()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, key)
        os.fsync(fd)
    finally:
        os.close(fd)
    return tmp


def _key_dir(state_dir: str | os.PathLike[str]) -> Path:
    state = Path(state_dir)
    if not state.is_dir():
        raise KeyFileError(f"{state}: the state directory does not exist")
    directory = state / KEY_DIR
    try:
        directory.mkdir(mode=0o700, exist_ok=True)
    except OSError as exc:
        raise KeyFileError(f"{directory}: {exc.strerror}") from None
    return directory


def ensure_private_key(state_dir: str | os.PathLike[str]) -> tuple[KeyFile, bool]:
    """The key file, made now if there is none; and whether it was made by this call."""
    directory = _key_dir(state_dir)
    path = directory / KEY_FILE
    made = False
    try:
        st = _check(path)
    except FileNotFoundError:
        tmp = _write_new_key(directory)
        try:
            os.link(tmp, path)  # fails if the other daemon made one meanwhile: then that one is the key
            made = True
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
        st = _check(path)
    return KeyFile(path, (st.st_dev, st.st_ino, st.st_mtime_ns)), made


def current_key(state_dir: str | os.PathLike[str]) -> KeyFile | None:
    """The key file as it is now (None if there is none); raises KeyFileError for one that cannot be trusted."""
    path = key_path(state_dir)
    try:
        st = _check(path)
    except FileNotFoundError:
        return None
    return KeyFile(path, (st.st_dev, st.st_ino, st.st_mtime_ns))


def public_key(key: KeyFile) -> str:
    """The public key of the private key in ``key`` (``wg pubkey``, the private key on stdin)."""
    try:
        private = key.path.read_bytes()
    except OSError as exc:
        raise KeyFileError(f"{key.path}: {exc.strerror}") from None
    return _run_wg(["pubkey"], stdin=private).decode().strip()


def rotate(state_dir: str | os.PathLike[str]) -> KeyFile:
    """Replace the private key with a new one, atomically (readers see the old file or the new one)."""
    directory = _key_dir(state_dir)
    tmp = _write_new_key(directory)
    os.replace(tmp, directory / KEY_FILE)
    st = _check(directory / KEY_FILE)
    return KeyFile(directory / KEY_FILE, (st.st_dev, st.st_ino, st.st_mtime_ns))
