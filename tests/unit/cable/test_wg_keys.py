"""The node's WireGuard key pair: made once in a 0600 file of a 0700 directory, its public key derived by the
real ``wg`` (checked here against ``wg pubkey`` run by the test), rotated atomically, and refused in one line
when others may read it or it is not a regular file."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from magw.drivers.wireguard import keys
from magw.drivers.wireguard.keys import KeyFileError, current_key, ensure_private_key, key_path, public_key, rotate
from magw.model.cable import check_public_key
from tests.unit.cable.data import E_GW1_PRIV, E_GW1_PUB

pytestmark = pytest.mark.skipif(shutil.which("wg") is None, reason="needs wireguard-tools' wg")


def wg_pubkey(private: bytes) -> str:
    """The public key as the test itself gets it from ``wg pubkey``."""
    done = subprocess.run(["wg", "pubkey"], input=private, capture_output=True, check=True, timeout=5)
    return done.stdout.decode().strip()


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def put_key(state: Path, text: str, file_mode: int = 0o600) -> Path:
    directory = state / "wireguard"
    directory.mkdir(mode=0o700, exist_ok=True)
    path = directory / "private.key"
    path.write_text(text)
    path.chmod(file_mode)
    return path


def test_the_first_call_makes_a_0600_key_in_a_0700_directory(tmp_path: Path) -> None:
    key, made = ensure_private_key(tmp_path)
    assert made is True
    assert key.path == tmp_path / "wireguard" / "private.key" == key_path(tmp_path)
    assert mode(tmp_path / "wireguard") == 0o700
    assert mode(key.path) == 0o600
    assert stat.S_ISREG(os.lstat(key.path).st_mode)
    text = key.path.read_text().strip()
    assert check_public_key(text) is None  # a private key has the same shape as a public one
    assert os.listdir(tmp_path / "wireguard") == ["private.key"]  # no temporary file left behind


def test_the_second_call_returns_the_same_key(tmp_path: Path) -> None:
    first, _ = ensure_private_key(tmp_path)
    content = first.path.read_bytes()
    second, made = ensure_private_key(tmp_path)
    assert made is False
    assert second == first and second.identity == first.identity
    assert second.path.read_bytes() == content


def test_the_public_key_is_what_wg_pubkey_says(tmp_path: Path) -> None:
    key, _ = ensure_private_key(tmp_path)
    derived = public_key(key)
    assert derived == wg_pubkey(key.path.read_bytes())
    assert check_public_key(derived) is None
    assert derived != key.path.read_text().strip()


def test_a_known_private_key_gives_its_known_public_key(tmp_path: Path) -> None:
    put_key(tmp_path, E_GW1_PRIV + "\n")
    key, made = ensure_private_key(tmp_path)
    assert made is False
    assert public_key(key) == E_GW1_PUB


def test_rotate_changes_the_identity_and_the_public_key(tmp_path: Path) -> None:
    old, _ = ensure_private_key(tmp_path)
    old_public = public_key(old)
    new = rotate(tmp_path)
    assert new.path == old.path
    assert new.identity != old.identity
    assert public_key(new) != old_public
    assert public_key(new) == wg_pubkey(new.path.read_bytes())
    assert mode(new.path) == 0o600
    again, made = ensure_private_key(tmp_path)
    assert made is False and again.identity == new.identity
    assert current_key(tmp_path) == new
    assert os.listdir(tmp_path / "wireguard") == ["private.key"]


def test_rotate_without_a_key_makes_one(tmp_path: Path) -> None:
    new = rotate(tmp_path)
    assert mode(new.path) == 0o600 and mode(tmp_path / "wireguard") == 0o700
    assert ensure_private_key(tmp_path) == (new, False)


def test_current_key_is_none_before_the_first_key(tmp_path: Path) -> None:
    assert current_key(tmp_path) is None
    assert not (tmp_path / "wireguard").exists()  # asking does not make anything
    key, _ = ensure_private_key(tmp_path)
    assert current_key(tmp_path) == key


@pytest.mark.parametrize("file_mode", [0o644, 0o640, 0o604, 0o660])
def test_a_key_others_may_read_is_refused_naming_the_mode(tmp_path: Path, file_mode: int) -> None:
    path = put_key(tmp_path, E_GW1_PRIV + "\n", file_mode)
    for call in (ensure_private_key, current_key):
        with pytest.raises(KeyFileError) as info:
            call(tmp_path)
        message = str(info.value)
        assert f"mode {file_mode:04o}" in message and str(path) in message
        assert "\n" not in message and E_GW1_PRIV not in message
    assert path.read_text() == E_GW1_PRIV + "\n"  # refused, not replaced behind the user's back


def test_a_symlink_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.key"
    target.write_text(E_GW1_PRIV + "\n")
    target.chmod(0o600)
    (tmp_path / "wireguard").mkdir(mode=0o700)
    (tmp_path / "wireguard" / "private.key").symlink_to(target)
    with pytest.raises(KeyFileError) as info:
        ensure_private_key(tmp_path)
    assert "not a regular file" in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(KeyFileError):
        current_key(tmp_path)


def test_a_dangling_symlink_is_refused_not_followed(tmp_path: Path) -> None:
    (tmp_path / "wireguard").mkdir(mode=0o700)
    (tmp_path / "wireguard" / "private.key").symlink_to(tmp_path / "planted.key")
    with pytest.raises(KeyFileError, match="not a regular file"):
        ensure_private_key(tmp_path)
    assert not (tmp_path / "planted.key").exists()


def test_a_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "wireguard" / "private.key").mkdir(parents=True)
    with pytest.raises(KeyFileError) as info:
        ensure_private_key(tmp_path)
    assert "not a regular file" in str(info.value) and "\n" not in str(info.value)


def test_a_missing_state_directory_is_refused(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    for call in (ensure_private_key, rotate):
        with pytest.raises(KeyFileError) as info:
            call(missing)
        assert str(info.value) == f"{missing}: the state directory does not exist"
    assert not missing.exists()


def test_a_race_with_the_other_daemon_keeps_its_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both daemons of a node may make the key at once: the one that links second uses the first one's key."""
    real = keys._write_new_key

    def other_daemon_first(directory: Path) -> Path:
        tmp = real(directory)
        put_key(tmp_path, E_GW1_PRIV + "\n")  # the other daemon's key lands meanwhile
        return tmp

    monkeypatch.setattr(keys, "_write_new_key", other_daemon_first)
    key, made = ensure_private_key(tmp_path)
    assert made is False
    assert key.path.read_text() == E_GW1_PRIV + "\n"
    assert public_key(key) == E_GW1_PUB
    assert os.listdir(tmp_path / "wireguard") == ["private.key"]  # our temporary file is gone


def test_a_missing_wg_binary_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(keys, "WG", str(tmp_path / "no-wg"))
    with pytest.raises(KeyFileError) as info:
        ensure_private_key(tmp_path)
    assert str(info.value) == "wg: not found (install wireguard-tools)"


def test_a_key_wg_refuses_is_one_line(tmp_path: Path) -> None:
    put_key(tmp_path, "not a key\n")
    key, _ = ensure_private_key(tmp_path)
    with pytest.raises(KeyFileError) as info:
        public_key(key)
    assert str(info.value).startswith("wg pubkey: ") and "\n" not in str(info.value)
