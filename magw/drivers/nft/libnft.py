"""Our own small ctypes binding to libnftables (Debian 12: libnftables1 1.0.6), JSON in and out.

Only the handful of calls we need: a context, JSON output, buffered output and
errors, and ``nft_run_cmd_from_buffer``. With the JSON output flag set, the
library parses the input buffer as libnftables JSON (``libnftables-json(5)``);
a JSON document is ONE netlink batch, so one kernel transaction.

Namespaces. libnftables 1.0.6 opens its netlink socket in ``nft_ctx_new`` (when
the flags are NFT_CTX_DEFAULT), not lazily: a context created while the thread
is in namespace A keeps talking to A after the thread returns (checked with two
throwaway namespaces, see tests/test_libnft.py). We still enter the namespace
around every command as well, so a future version that opens or reopens its
socket lazily cannot silently act on the host's namespace.

Crashes. A libnftables bug is a crash of OUR process (it runs in-process). Known
one: nft 1.0.6 segfaults on a map lookup whose ``data`` names a plain set
(``snat to ip saddr map @a_set``); ``magw.drivers.nft.preflight`` refuses that
shape before it reaches the library.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import threading
import weakref
from typing import Any

import structlog

from magw.drivers.netns import in_netns, netns_path

log = structlog.get_logger(__name__)

_FALLBACK_SONAME = "libnftables.so.1"

# <nftables/libnftables.h>
_NFT_CTX_DEFAULT = 0
NFT_CTX_OUTPUT_HANDLE = 1 << 3
NFT_CTX_OUTPUT_JSON = 1 << 4

_lib: ctypes.CDLL | None = None
_lib_lock = threading.Lock()


class NftError(Exception):
    """libnftables refused a command; the message is the library's error text on one line."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _declare(lib: ctypes.CDLL) -> None:
    ptr, cstr, uint = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint
    sigs: dict[str, tuple[list[Any], Any]] = {
        "nft_ctx_new": ([ctypes.c_uint32], ptr),
        "nft_ctx_free": ([ptr], None),
        "nft_ctx_output_get_flags": ([ptr], uint),
        "nft_ctx_output_set_flags": ([ptr, uint], None),
        "nft_ctx_buffer_output": ([ptr], ctypes.c_int),
        "nft_ctx_buffer_error": ([ptr], ctypes.c_int),
        "nft_ctx_get_output_buffer": ([ptr], cstr),
        "nft_ctx_get_error_buffer": ([ptr], cstr),
        "nft_run_cmd_from_buffer": ([ptr, cstr], ctypes.c_int),
    }
    for name, (argtypes, restype) in sigs.items():
        fn = getattr(lib, name)
        fn.argtypes = argtypes
        fn.restype = restype


def load_library() -> ctypes.CDLL:
    """The libnftables shared library, loaded once (found by ``ctypes.util.find_library`` first)."""
    global _lib
    with _lib_lock:
        if _lib is None:
            soname = ctypes.util.find_library("nftables") or _FALLBACK_SONAME
            try:
                lib = ctypes.CDLL(soname, use_errno=True)
            except OSError as exc:
                raise NftError(f"cannot load libnftables ({soname}): {exc}; install libnftables1") from exc
            _declare(lib)
            _lib = lib
        return _lib


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


class Nft:
    """A libnftables context bound to one network namespace (None: the caller's namespace).

    ``json_cmd`` runs one JSON document as one transaction. A context is not
    thread-safe in the library; calls are serialized with a lock.
    """

    def __init__(self, netns: str | None = None) -> None:
        if netns is not None:
            netns_path(netns)  # NoSuchNetns now rather than at the first command
        self.netns = netns
        self._lib = load_library()
        self._lock = threading.Lock()
        with in_netns(netns):
            ctx = self._lib.nft_ctx_new(_NFT_CTX_DEFAULT)
        if not ctx:
            raise NftError("nft_ctx_new failed")
        self._ctx: int | None = ctx
        self._finalizer = weakref.finalize(self, self._lib.nft_ctx_free, ctx)
        self._lib.nft_ctx_output_set_flags(ctx, NFT_CTX_OUTPUT_JSON)
        if self._lib.nft_ctx_buffer_output(ctx) != 0 or self._lib.nft_ctx_buffer_error(ctx) != 0:
            self.close()
            raise NftError("cannot buffer libnftables output")

    def close(self) -> None:
        """Free the context (idempotent)."""
        self._finalizer()
        self._ctx = None

    def __enter__(self) -> Nft:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, command: str) -> str:
        """Run ``command`` (nft text or a JSON document); return the output text, raise NftError on failure."""
        with self._lock:
            if self._ctx is None:
                raise NftError("libnftables context is closed")
            with in_netns(self.netns):
                rc = self._lib.nft_run_cmd_from_buffer(self._ctx, command.encode())
            out = (self._lib.nft_ctx_get_output_buffer(self._ctx) or b"").decode(errors="replace")
            err = (self._lib.nft_ctx_get_error_buffer(self._ctx) or b"").decode(errors="replace")
        if rc != 0:
            raise NftError(_one_line(err))
        if err.strip():
            log.debug("nft.library_message", netns=self.netns, message=_one_line(err))
        return out

    def json_cmd(self, doc: dict[str, Any]) -> dict[str, Any]:
        """Run one libnftables JSON document (one transaction); the parsed output, ``{}`` when there is none."""
        out = self.run(json.dumps(doc))
        if not out.strip():
            return {}
        parsed: dict[str, Any] = json.loads(out)
        return parsed

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
