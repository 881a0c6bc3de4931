"""``magw cable public-key | rotate-key`` on a state directory: the public key only, ever; a rotation gives a new
0600 key; a key file others can read is refused in one line, and rotating is its remedy."""

from __future__ import annotations

import base64
import os
import stat
import subprocess
from pathlib import Path

from tests.support.cli import MagwCli


def _public_of(path: Path) -> str:
    """The public key of the file's private key, by the ``wg`` tool itself (not by the code under test)."""
    done = subprocess.run(["wg", "pubkey"], input=path.read_bytes(), capture_output=True, check=True, timeout=10)
    return done.stdout.decode().strip()


def test_public_key_makes_the_pair_once_and_prints_only_the_public_key(magw_cli: MagwCli, tmp_path: Path) -> None:
    first = magw_cli("cable", "public-key", "--state-dir", str(tmp_path))
    key_file = tmp_path / "wireguard" / "private.key"
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == _public_of(key_file)
    assert len(base64.b64decode(first.stdout.strip())) == 32
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "wireguard").stat().st_mode) == 0o700
    private = key_file.read_text().strip()
    assert private not in first.stdout + first.stderr
    again = magw_cli("cable", "public-key", "--state-dir", str(tmp_path))
    assert again.stdout == first.stdout and "made a new key pair" not in again.stderr


def test_rotate_key_replaces_the_key_and_names_both_public_keys(magw_cli: MagwCli, tmp_path: Path) -> None:
    old = magw_cli("cable", "public-key", "--state-dir", str(tmp_path), check=True).stdout.strip()
    key_file = tmp_path / "wireguard" / "private.key"
    old_private = key_file.read_text().strip()
    done = magw_cli("cable", "rotate-key", "--state-dir", str(tmp_path))
    assert done.returncode == 0, done.stderr
    new = _public_of(key_file)
    assert new != old
    assert done.stdout.splitlines()[0] == f"new public key {new} (was {old})"
    assert old_private not in done.stdout and key_file.read_text().strip() not in done.stdout


def test_a_key_others_can_read_is_refused_and_rotating_replaces_it(magw_cli: MagwCli, tmp_path: Path) -> None:
    magw_cli("cable", "public-key", "--state-dir", str(tmp_path), check=True)
    key_file = tmp_path / "wireguard" / "private.key"
    os.chmod(key_file, 0o644)
    refused = magw_cli("cable", "public-key", "--state-dir", str(tmp_path))
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines() == [
        f"magw: error: cable public-key: {key_file}: mode 0644 lets others read the private key; refusing to use it "
        "(rotate it: magw cable rotate-key)"
    ]
    rotated = magw_cli("cable", "rotate-key", "--state-dir", str(tmp_path))
    assert rotated.returncode == 0 and rotated.stdout.startswith("new public key ")
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600


def test_a_missing_state_directory_is_bad_input(magw_cli: MagwCli, tmp_path: Path) -> None:
    done = magw_cli("cable", "rotate-key", "--state-dir", str(tmp_path / "nope"))
    assert done.returncode == 2
    assert f"{tmp_path / 'nope'}: the state directory does not exist" in done.stderr
    assert not (tmp_path / "nope").exists()
