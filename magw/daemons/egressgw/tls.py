"""magw-egress's TLS server context and the checks of its serving flags (docs/egress-gateway.md, "API")."""

from __future__ import annotations

import argparse
import grp
import ssl

INSECURE_FLAG = "--insecure-unauthenticated-http"
DEFAULT_AGENT_SA = "magw-egress-agent"


def server_context(cert_file: str, key_file: str) -> ssl.SSLContext:
    """TLS 1.2 or newer with the certificate chain and key of these PEM files (read once, at start)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_file, key_file)
    return context


def serving_problem(args: argparse.Namespace) -> str | None:
    """Why these flags must not start (one line), or None. TCP needs --source kube with TLS (bearer tokens are
    checked with the API server), unless the insecure flag says, loudly, that anyone who reaches the port may
    change every binding."""
    tls = (args.tls_cert_file is not None, args.tls_key_file is not None)
    if tls[0] != tls[1]:
        return "--tls-cert-file and --tls-key-file: give both"
    if args.socket is not None:
        if any(tls) or args.insecure_unauthenticated_http:
            return "--socket: TLS and " + INSECURE_FLAG + " are for --listen (the socket's permissions guard it)"
        return None
    if args.insecure_unauthenticated_http:
        return None
    if args.source != "kube":
        return (f"--listen with --source {args.source}: no API server to check tokens with; serve on --socket, "
                f"or give {INSECURE_FLAG} to let anyone who reaches the port change every binding")  # fmt: skip
    if not tls[0]:
        return f"--listen: give --tls-cert-file and --tls-key-file (or {INSECURE_FLAG}, which also turns auth off)"
    return None


def group_id(value: str) -> int:
    """argparse type of --socket-group: a group name or number."""
    if value.isdigit():
        return int(value)
    try:
        return grp.getgrnam(value).gr_gid
    except KeyError:
        raise argparse.ArgumentTypeError(f"no group {value!r}") from None
