"""``magw cable public-key | rotate-key``: a gateway node's WireGuard key pair (docs/cables.md).

``public-key`` prints the node's public key (making the key pair if there is none, as the daemons would).
``rotate-key`` replaces the private key with a new one, atomically; the running ``magw-gateway`` notices the new
file within 0.1 s and publishes the new public key, the remote gateways' route agents then replace the peer and
the node's route agent sets the new private key. Traffic through this gateway is lost from the moment one side
has the new key until the other has it too (benchmarks/rotation.py measures it). Neither ever prints the
private key.
"""

from __future__ import annotations

import argparse
import sys

from magw.cli import UsageError
from magw.drivers.wireguard import keys

EXIT_OK = 0
EXIT_FAILURE = 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    for verb, text in (
        ("public-key", "print this node's WireGuard public key (the key pair is made if there is none)"),
        ("rotate-key", "replace this node's WireGuard private key; the daemons publish and apply the new one"),
    ):
        p = verbs.add_parser(verb, help=text, description=text)
        p.add_argument(
            "--state-dir",
            required=True,
            metavar="DIR",
            help="the daemons' --state-dir on this node (the key is DIR/wireguard/private.key)",
        )


def run(args: argparse.Namespace) -> int:
    try:
        if args.verb == "public-key":
            current, made = keys.ensure_private_key(args.state_dir)
            print(keys.public_key(current))
            if made:
                print(f"made a new key pair in {current.path}", file=sys.stderr)
            return EXIT_OK
        old = _old_public_key(args.state_dir)
        new = keys.public_key(keys.rotate(args.state_dir))
    except keys.KeyFileError as exc:
        if "state directory does not exist" in str(exc):
            raise UsageError(f"cable {args.verb}: {exc}") from None
        print(f"magw: error: cable {args.verb}: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    print(f"new public key {new}" + (f" (was {old})" if old else ""))
    print("the gateway daemon publishes it within 0.1 s; remote gateways and this node's route agent follow")
    return EXIT_OK


def _old_public_key(state_dir: str) -> str | None:
    """The public key before the rotation; None without a key, or with one that cannot be trusted (a rotation
    is the remedy for a key file others could read)."""
    try:
        before = keys.current_key(state_dir)
    except keys.KeyFileError:
        return None
    return keys.public_key(before) if before is not None else None
