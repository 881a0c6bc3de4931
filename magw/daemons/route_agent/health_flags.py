"""Command-line flags of failure detection (docs/health.md): probes, liveness set, endpoint TTL, heartbeat."""

from __future__ import annotations

import argparse
from collections.abc import Callable

import attrs

from magw.daemons.common.flags import OneLineParser
from magw.daemons.common.flags import positive_seconds as _seconds
from magw.health import params as hp
from magw.health.params import LivenessParams, ProbeParams

DEFAULT_ENDPOINT_TTL = 5.0
DEFAULT_HEARTBEAT = 1.0


def _seconds_or_off(text: str) -> float:
    if text.strip() in ("0", "0.0"):
        return 0.0
    return _seconds(text)


def _count(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def _budget(text: str) -> float:
    value = _fraction(text)
    if not 0 <= value <= hp.MAX_BUDGET:
        raise argparse.ArgumentTypeError(f"must be from 0 to {hp.MAX_BUDGET:g} per second, got {text}")
    return value


def _fraction(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def add_health_arguments(p: argparse.ArgumentParser) -> None:
    """The route agent's probe and liveness flags (``--lease-*``), and the file broker's endpoint TTL."""
    g = p.add_argument_group("failure detection (docs/health.md)")
    flags: list[tuple[str, Callable[[str], float], float, str, str]] = [
        ("--probe-interval", _seconds, hp.DEFAULT_INTERVAL, "SECONDS", "the most seconds between two probes of one "
         "peer"),
        ("--probe-budget", _budget, hp.DEFAULT_BUDGET, "PROBES", "probes per second this node may send to probe "
         "faster than --probe-interval, down to --probe-min-interval; 0: always --probe-interval"),
        ("--probe-gateway-budget", _budget, hp.DEFAULT_GATEWAY_BUDGET, "ECHOES", "and no faster than keeps the "
         "echoes per second one gateway answers to all the nodes of this cluster within ECHOES; 0: no bound"),
        ("--probe-timeout", _seconds, hp.DEFAULT_TIMEOUT, "SECONDS", "a later reply is a miss; > RTT, <= interval"),
        ("--probe-startup-grace", _seconds_or_off, hp.DEFAULT_STARTUP_GRACE, "SECONDS", "after start, a peer never "
         "seen answering is not taken down for SECONDS (its misses count); 0: no grace"),
        ("--down-after", _count, hp.DEFAULT_DOWN_AFTER, "N", "consecutive misses that take a peer down"),
        ("--up-after", _count, hp.DEFAULT_UP_AFTER, "N", "consecutive replies that bring a down peer back"),
        ("--probe-jitter", _fraction, hp.DEFAULT_JITTER, "FRACTION", "each interval is shortened by up to FRACTION"),
        ("--lease-timeout", _seconds, hp.DEFAULT_LIVENESS_TIMEOUT, "SECONDS", "lifetime of this gateway's lease"),
        ("--lease-refresh", _seconds, hp.DEFAULT_LIVENESS_REFRESH, "SECONDS", "lease renewal period, <= timeout / 2"),
        ("--lease-exit-hold", _seconds_or_off, hp.DEFAULT_LIVENESS_EXIT_HOLD, "SECONDS", "on SIGTERM/SIGINT the lease "
         "is renewed once for SECONDS, so a restart moves no flow; 0: withdraw it at once (drain)"),
        ("--endpoint-ttl", _seconds_or_off, DEFAULT_ENDPOINT_TTL, "SECONDS", "Endpoint documents not touched for "
         "SECONDS are gone; 0: never"),
    ]  # fmt: skip
    for flag, kind, default, metavar, text in flags:
        g.add_argument(flag, type=kind, default=default, metavar=metavar, help=f"{text} (default %(default)s)")
    g.add_argument(
        "--probe-fast-interval",
        type=_seconds,
        metavar="SECONDS",
        help="seconds between the probes of a peer that missed (or answered while down), until it is down (or "
        f"up); <= interval (default {hp.DEFAULT_FAST_INTERVAL:g}, or the interval if shorter)",
    )
    g.add_argument(
        "--probe-min-interval",
        type=_seconds,
        metavar="SECONDS",
        help="the fewest seconds between two probes of one peer, when --probe-budget allows it; <= interval "
        f"(default {hp.DEFAULT_MIN_INTERVAL:g}, or the interval if shorter)",
    )
    g.add_argument("--no-health", action="store_true", help="no probes and no lease: only the broker's Health")


def add_heartbeat_argument(p: argparse.ArgumentParser) -> None:
    """The gateway daemon's heartbeat: how often it touches its Endpoint document."""
    p.add_argument(
        "--heartbeat",
        type=_seconds,
        default=DEFAULT_HEARTBEAT,
        metavar="SECONDS",
        help="touch our Endpoint document every SECONDS, well below the route agents' --endpoint-ttl (default 1)",
    )


def _flag_error(parser: OneLineParser, exc: ValueError) -> None:
    """``probe timeout: must be ...`` -> ``--probe-timeout: must be ...`` (exit 2)."""
    field, _, reason = str(exc).partition(": ")
    parser.error(f"--{field.replace(' ', '-')}: {reason}")


def probe_params(parser: OneLineParser, args: argparse.Namespace) -> ProbeParams:
    try:
        optional = {"fast_interval": args.probe_fast_interval, "min_interval": args.probe_min_interval}
        return ProbeParams(
            **{k: v for k, v in optional.items() if v is not None},
            interval=args.probe_interval,
            budget=args.probe_budget,
            gateway_budget=args.probe_gateway_budget,
            timeout=args.probe_timeout,
            down_after=args.down_after,
            up_after=args.up_after,
            jitter=args.probe_jitter,
            startup_grace=args.probe_startup_grace,
        )
    except ValueError as exc:
        _flag_error(parser, exc)
        raise  # not reached: parser.error exits


def liveness_params(parser: OneLineParser, args: argparse.Namespace) -> LivenessParams:
    try:
        return LivenessParams(timeout=args.lease_timeout, refresh=args.lease_refresh, exit_hold=args.lease_exit_hold)
    except ValueError as exc:
        _flag_error(parser, exc)
        raise  # not reached: parser.error exits


def endpoint_ttl(args: argparse.Namespace) -> float | None:
    """The broker's TTL: None when ``--endpoint-ttl 0``."""
    ttl: float = args.endpoint_ttl
    return ttl if ttl > 0 else None


@attrs.frozen(kw_only=True)
class HealthSettings:
    probe: ProbeParams
    liveness: LivenessParams


def health_settings(parser: OneLineParser, args: argparse.Namespace) -> HealthSettings | None:
    """The validated probe and liveness parameters, or None when failure detection is off for this run."""
    if args.no_health or getattr(args, "fake", False) or getattr(args, "once", False):
        return None
    return HealthSettings(probe=probe_params(parser, args), liveness=liveness_params(parser, args))
