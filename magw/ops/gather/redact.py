"""Secrets out of what ``magw gather`` writes: the second line of defence (the first: never read them). Pure.

Text (logs, command outputs, broker documents):

- a PEM private key block (``-----BEGIN ... PRIVATE KEY-----`` to its END line);
- the value of a field whose name says secret: ``private key``/``PrivateKey``/``private_key`` (``wg``, wg-quick,
  the UAPI), ``preshared_key``, ``client-key-data``, ``token`` (``bearerToken``, ``brokerK8sApiServerToken``),
  ``password``, ``secret``, ``psk`` (``ceIPSecPSK``), ``auth_pass`` (keepalived), as ``name: value``,
  ``name=value`` or ``"name": "value"``;
- ``Bearer <token>`` (an Authorization header) and anything shaped like a JWT (a service account token).

Documents (JSON/YAML values): every mapping key whose name says secret gets the value ``REDACTED``.
A public key (``publicKey``, ``public key``) is kept: peers are named by it.
"""

from __future__ import annotations

import re
from typing import Any

REDACTED = "REDACTED"

# A field name that says its value is a secret (matched case-insensitively, anywhere in the name).
_SECRET_NAME = (
    r"(?:private[ _-]?key|preshared[ _-]?key|client[ _-]?key[ _-]?data|token|password|passwd|secret|psk"
    r"|auth[ _-]?pass)"
)
SECRET_NAME = re.compile(_SECRET_NAME, re.IGNORECASE)

_PEM = re.compile(r"-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.DOTALL)
# name (quoted or not, letters/digits/_-. and inner spaces for "private key"), then : or =, then the value:
# a quoted string or a run up to a space, comma, quote or closing brace. A name starts only where a run of name
# characters starts (the lookbehind): without it every position inside a long run (a base64 blob) was a start and
# the search took quadratic time (487 s on 40 KB of base64).
_FIELD = re.compile(
    r"""(?P<name>(?<![A-Za-z0-9_.-])["']?[A-Za-z0-9_.-]*""" + _SECRET_NAME
    + r"""[A-Za-z0-9_.-]*["']?)(?P<sep>\s*[:=]\s*)"""
    r"""(?P<value>"(?:[^"\\\n]|\\.)*"|'[^'\n]*'|[^\s,;}"'\]]+)""",
    re.IGNORECASE,
)
_BEARER = re.compile(r"(?P<word>\bbearer)(?P<sep>\s+)[A-Za-z0-9._~+/=-]+", re.IGNORECASE)
_JWT = re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*")


_NOT_SECRET = ("(hidden)", "(none)", REDACTED, f'"{REDACTED}"', f"'{REDACTED}'")


def _field(match: re.Match[str]) -> str:
    value = match.group("value")
    if value in _NOT_SECRET:
        return match.group(0)
    quote = value[0] if value[:1] in ('"', "'") else ""
    return f"{match.group('name')}{match.group('sep')}{quote}{REDACTED}{quote}"


def redact_text(text: str) -> tuple[str, int]:
    """``text`` with every secret above replaced by ``REDACTED``; and how many were replaced."""
    total = 0
    text, n = _PEM.subn(lambda m: f"-----BEGIN {m.group(1)}PRIVATE KEY----- {REDACTED} -----END PRIVATE KEY-----", text)
    total += n
    before = text
    text = _FIELD.sub(_field, text)
    total += sum(1 for m in _FIELD.finditer(before) if m.group("value") not in _NOT_SECRET)
    text, n = _BEARER.subn(lambda m: f"{m.group('word')}{m.group('sep')}{REDACTED}", text)
    total += n
    text, n = _JWT.subn(REDACTED, text)
    return text, total + n


def redact_doc(doc: Any) -> tuple[Any, int]:
    """A copy of a JSON-like value with the value of every secret-named key replaced (strings in it redacted as
    text too); and how many were replaced."""
    if isinstance(doc, dict):
        out: dict[Any, Any] = {}
        total = 0
        for key, value in doc.items():
            if isinstance(key, str) and SECRET_NAME.search(key) and value not in (None, "", [], {}):
                out[key] = REDACTED
                total += 1
            else:
                out[key], n = redact_doc(value)
                total += n
        return out, total
    if isinstance(doc, list):
        items = [redact_doc(v) for v in doc]
        return [v for v, _n in items], sum(n for _v, n in items)
    if isinstance(doc, str):
        return redact_text(doc)
    return doc, 0


def kubeconfig_summary(doc: Any) -> dict[str, Any]:
    """What a kubeconfig says without its credentials: clusters (name, server), contexts, the current one, and per
    user only which kinds of credential it holds (``token``, ``client-key-data``...), never their values."""
    if not isinstance(doc, dict):
        return {"error": "not a kubeconfig (not a mapping)"}

    def named(section: str) -> list[tuple[str, dict[str, Any]]]:
        items = doc.get(section) or []
        out = []
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict):
                body = item.get(section[:-1])
                out.append((str(item.get("name", "")), body if isinstance(body, dict) else {}))
        return out

    return {
        "current-context": doc.get("current-context"),
        "clusters": [{"name": n, "server": c.get("server")} for n, c in named("clusters")],
        "contexts": [
            {"name": n, "cluster": c.get("cluster"), "user": c.get("user"), "namespace": c.get("namespace")}
            for n, c in named("contexts")
        ],
        "users": [{"name": n, "credentials": sorted(str(k) for k in u)} for n, u in named("users")],
    }
