"""Clock skew against a reference (verdict only).

How it is measured: an HTTP(S) request to the reference (``--clock-url``, e.g. the API server's ``/version``)
and its ``Date`` header (whole seconds) against the midpoint of our clock before and after the request. The
error is at most half the round trip plus one second (the header's resolution), so only a skew beyond that
counts. Leases, certificates and the health monitor's ``since`` times go wrong beyond a few seconds.
"""

from __future__ import annotations

from email.utils import parsedate_to_datetime

import attrs
import yaml

from magw.ops.diagnose.verdict import Check, failed, passed, warned

TOPIC = "clock"
WARN_SECONDS = 2.0
FAIL_SECONDS = 30.0


@attrs.frozen(kw_only=True)
class ClockSample:
    reference: str
    sent: float  # our clock (epoch seconds) before the request
    received: float  # ... and after the answer
    date_header: str | None
    error: str = ""


def skew_of(s: ClockSample) -> tuple[float, float] | None:
    """(skew, uncertainty) in seconds, skew = reference - ours; None when the header is missing or unreadable."""
    if not s.date_header:
        return None
    try:
        theirs = parsedate_to_datetime(s.date_header).timestamp()
    except (TypeError, ValueError):
        return None
    ours = (s.sent + s.received) / 2
    return theirs - ours, (s.received - s.sent) / 2 + 1.0


def clock_checks(samples: list[ClockSample]) -> list[Check]:
    if not samples:
        return [warned(TOPIC, "skew", "no reference to compare with", "pass --clock-url URL (the API server)")]
    out = []
    for s in samples:
        name = f"skew vs {s.reference}"
        got = skew_of(s)
        if got is None:
            why = s.error or f"no usable Date header ({s.date_header!r})"
            out.append(warned(TOPIC, name, f"not measured: {why}", "check the URL answers HTTP with a Date header"))
            continue
        skew, err = got
        beyond = max(0.0, abs(skew) - err)
        seen = f"{skew:+.1f} s (+-{err:.1f} s)"
        fix = "run NTP on this node (timedatectl set-ntp true, chrony)"
        if beyond > FAIL_SECONDS:
            out.append(failed(TOPIC, name, seen, fix))
        elif beyond > WARN_SECONDS:
            out.append(warned(TOPIC, name, seen, fix))
        else:
            out.append(passed(TOPIC, name, seen))
    return out


class KubeconfigError(ValueError):
    """A kubeconfig we cannot take the API server's address from (one line)."""


def kubeconfig_server(text: str, source: str) -> str:
    """The API server URL of a kubeconfig's current context (no credential is read or used: the Date header of
    any answer, even 401, is the reference)."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise KubeconfigError(f"--kubeconfig {source}: not YAML ({type(exc).__name__})") from None
    if not isinstance(doc, dict):
        raise KubeconfigError(f"--kubeconfig {source}: not a kubeconfig (no mapping)")
    contexts = {c.get("name"): c.get("context") or {} for c in doc.get("contexts") or [] if isinstance(c, dict)}
    clusters = {c.get("name"): c.get("cluster") or {} for c in doc.get("clusters") or [] if isinstance(c, dict)}
    current = doc.get("current-context")
    if current not in contexts:
        raise KubeconfigError(f"--kubeconfig {source}: current-context {current!r} is not among its contexts")
    cluster = contexts[current].get("cluster")
    server = clusters.get(cluster, {}).get("server")
    if not isinstance(server, str) or not server.startswith(("http://", "https://")):
        raise KubeconfigError(f"--kubeconfig {source}: cluster {cluster!r} has no http(s) server")
    return server.rstrip("/") + "/version"
