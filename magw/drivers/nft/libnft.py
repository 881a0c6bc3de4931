"""libnftables through Debian's official Python binding (``python3-nftables``), JSON in and out.

The binding is the ``nftables`` package of Debian's ``python3-nftables``
(1.0.6-2+deb12u2, locked to ``libnftables1`` of the same version). It is not on
PyPI; ``scripts/setup.sh`` exposes that one package to our virtualenv (a ``.pth``
file listing a directory that holds only a symlink to it). ``Nft`` wraps one
``nftables.Nftables`` context and adds what the binding leaves to its callers:

- errors: a non-zero return code raises ``NftError`` with the library's error
  text on one line (the binding returns ``(rc, output, error)``);
- namespaces (below), a lock (a libnftables context is not thread-safe), and an
  explicit ``close()`` (the binding frees its context only in ``__del__``).

We call ``json_cmd``, which does NOT validate the document against the JSON
schema (that is ``json_validate``, which needs jsonschema; we never call it:
libnftables parses and checks the document itself). A JSON document is ONE
netlink batch, so one kernel transaction. ``benchmarks/nft_binding.py`` times the
binding against a bare ctypes call on a 100k-element transaction.

Namespaces. libnftables 1.0.6 opens its netlink socket in ``nft_ctx_new``, which
``Nftables()`` calls, not lazily: a context created while the thread is in
namespace A keeps talking to A after the thread returns (checked with two
throwaway namespaces, see tests/kernel/test_libnft.py). So the context is created
inside the namespace, and we still enter the namespace around every command as
well, so a future version that opens or reopens its socket lazily cannot
silently act on the host's namespace.

Crashes. A libnftables bug is a crash of OUR process (it runs in-process). Known
one: nft 1.0.6 segfaults on a map lookup whose ``data`` names a plain set
(``snat to ip saddr map @a_set``); ``magw.drivers.nft.preflight`` refuses that
shape before it reaches the library (``NftDriver`` runs it before every apply).
"""

from __future__ import annotations

import json
import threading
from typing import Any

import structlog

from magw.drivers.netns import in_netns, netns_path

log = structlog.get_logger(__name__)

SONAME = "libnftables.so.1"  # what python3-nftables loads by default; named here for the error message


class NftError(Exception):
    """libnftables refused a command; the message is the library's error text on one line."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _binding() -> Any:
    """The ``nftables`` module of python3-nftables (untyped, hence Any); NftError when it is missing."""
    try:
        import nftables
    except ImportError as exc:
        raise NftError(
            f"cannot import nftables ({exc}): install Debian's python3-nftables and run scripts/setup.sh"
        ) from exc
    return nftables


def _one_line(text: str) -> str:
    """libnftables error text without the ``internal:0:0-0:`` locations and blank lines."""
    lines = []
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("internal:0:0-0: "):
            line = line[len("internal:0:0-0: ") :]
        if line:
            lines.append(line)
    return " | ".join(lines) or "libnftables failed without an error message"


def _text(value: object) -> str:
    """The binding's output or error: bytes when the command was bytes (we decode, never failing on bad UTF-8)."""
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return "" if value is None else str(value)


class Nft:
    """A libnftables context bound to one network namespace (None: the caller's namespace).

    ``json_cmd`` runs one JSON document as one transaction; ``run`` runs nft
    text. Calls are serialized with a lock.
    """

    def __init__(self, netns: str | None = None) -> None:
        if netns is not None:
            netns_path(netns)  # NoSuchNetns now rather than at the first command
        self.netns = netns
        self._lock = threading.Lock()
        module = _binding()
        with in_netns(netns):  # nft_ctx_new opens the socket: here, inside the namespace
            try:
                ctx = module.Nftables(sofile=SONAME)
            except OSError as exc:  # the shared library itself did not load
                raise NftError(f"cannot load libnftables ({SONAME}): {exc}; install libnftables1") from exc
        ctx.set_json_output(True)  # set once, so json_cmd never toggles it and text commands print JSON too
        self._ctx: Any = ctx

    def close(self) -> None:
        """Drop the context (idempotent); the binding frees it (``nft_ctx_free``) when the object goes."""
        with self._lock:
            self._ctx = None

    def __enter__(self) -> Nft:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _context(self) -> Any:
        if self._ctx is None:
            raise NftError("libnftables context is closed")
        return self._ctx

    def _check(self, rc: int, error: object) -> None:
        err = _text(error)
        if rc != 0:
            raise NftError(_one_line(err))
        if err.strip():
            log.debug("nft.library_message", netns=self.netns, message=_one_line(err))

    def run(self, command: str | bytes) -> str:
        """Run ``command`` (nft text or a JSON document, str or UTF-8 bytes); return the output text, raise NftError
        on failure."""
        with self._lock:
            ctx = self._context()
            with in_netns(self.netns):
                data = command.encode() if isinstance(command, str) else command
                rc, out, err = ctx.cmd(data)  # bytes in: the binding hands bytes back undecoded
        self._check(int(rc), err)
        return _text(out)

    def list_ruleset_terse(self) -> str:
        """``nft -j -t list ruleset``: every table, chain, rule and set declaration of the namespace, no named
        set's elements (anonymous sets inside rules are printed).

        nft 1.0.6 does not fetch named sets' elements into its cache for this command (10 ms and 4 MB beside a
        100k-element set, against 2-3 s and 135 MB for ``list table``, which fetches them even with terse).
        """
        with self._lock:
            ctx = self._context()
            ctx.set_terse_output(True)
            try:
                with in_netns(self.netns):
                    rc, out, err = ctx.cmd(b"list ruleset")
            finally:
                ctx.set_terse_output(False)
        self._check(int(rc), err)
        return _text(out)

    def json_cmd(self, doc: dict[str, Any]) -> dict[str, Any]:
        """Run one libnftables JSON document (one transaction); the parsed output, ``{}`` when there is none."""
        with self._lock:
            ctx = self._context()
            with in_netns(self.netns):
                try:  # json.dumps, nft_run_cmd_from_buffer, json.loads; no schema validation
                    rc, out, err = ctx.json_cmd(doc)
                except UnicodeDecodeError as exc:  # the binding decodes str commands' output strictly
                    raise NftError(f"libnftables printed text that is not UTF-8: {exc}") from exc
        self._check(int(rc), err)
        if not out:  # the binding returns the empty output string as it is
            return {}
        if not isinstance(out, dict):
            raise NftError(f"libnftables printed JSON that is not an object: {json.dumps(out)[:200]}")
        return out

    def table_names(self, family: str) -> set[str]:
        """Names of the tables of ``family`` in this namespace."""
        doc = self.json_cmd({"nftables": [{"list": {"tables": {"family": family}}}]})
        return {item["table"]["name"] for item in doc.get("nftables", ()) if "table" in item}

    def list_table_json(self, family: str, name: str) -> dict[str, Any] | None:
        """``nft -j list table FAMILY NAME`` as a dict; None when the table does not exist."""
        try:
            return self.json_cmd({"nftables": [{"list": {"table": {"family": family, "name": name}}}]})
        except NftError:
            # nft 1.0.6 words a missing table as "No such file or directory"; ask rather than parse the wording.
            if name not in self.table_names(family):
                return None
            raise
