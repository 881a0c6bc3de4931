"""A NETLINK_NETFILTER socket in a network namespace: one nftables batch (one kernel transaction), dumps.

``NfnlSocket(netns)`` creates the socket inside namespace ``netns`` (``magw.drivers.netns.in_netns``; a missing
namespace is ``NoSuchNetns``, nothing is created) and it stays there for its whole life, as libnftables' context
does. ``transaction(requests)`` frames the requests as nfnetlink does it for nft::

    NFNL_MSG_BATCH_BEGIN (res_id NFNL_SUBSYS_NFTABLES)
    request 1 .. request N       # each with NLM_F_ACK; NEWSETELEM also with NLM_F_CREATE (never NLM_F_EXCL)
    NFNL_MSG_BATCH_END

in ONE ``sendmsg``, so one skb, which the kernel runs as one transaction in the sender's context
(``nfnetlink_rcv_batch``): every request is tried, and the batch is committed only when none failed. Its replies
are queued before ``sendmsg`` returns: an error for the batch itself (its commit failed) first, then one ack per
request, ``0`` or the request's error. The transaction succeeded iff every request's ack is 0 and no error names
the batch. Fail closed: a reply that does not come within ``timeout`` (it never should), or a receive buffer
overrun, is reported as a failure whose result is unknown; the next observe tells the truth, and the reconciler
acts on that.

It also reads: ``dump(kind, body)`` sends one ``NLM_F_DUMP`` request and returns the reply messages (a dump
the kernel marks interrupted is read again), and ``generation()`` the ruleset's generation id, which every
committed transaction changes (``rawobserve`` reads it before and after its reads). Replies are matched to
requests by sequence number, so a reply left over from a read that timed out is never taken for another's.

Not thread-safe: one socket per driver, used under the driver's call.
"""

from __future__ import annotations

import errno
import os
import select
import socket
import struct
from collections.abc import Sequence

import structlog

from magw.drivers.netlink.nlattr import (
    NLM_F_ACK,
    NLM_F_CREATE,
    NLM_F_DUMP,
    NLM_F_DUMP_INTR,
    NLM_F_REQUEST,
    NLMSG_DONE,
    NLMSG_ERROR,
    NLMSGHDR,
    attrs_of,
    iter_messages,
    message,
    parse_error,
)
from magw.drivers.netlink.rawsock import set_buffers
from magw.drivers.netns import in_netns
from magw.drivers.nft.nfelems import NFNL_SUBSYS_NFTABLES, NFT_MSG_NEWSETELEM

log = structlog.get_logger(__name__)

NETLINK_NETFILTER = 12
NFNL_MSG_BATCH_BEGIN = 0x10
NFNL_MSG_BATCH_END = 0x11
SOL_NETLINK = 270
NETLINK_CAP_ACK = 10
NETLINK_EXT_ACK = 11
BUFFER = 4 << 20
NFT_MSG_NEWGEN = 15
NFT_MSG_GETGEN = 16
NFTA_GEN_ID = 1
MAX_DUMP_ATTEMPTS = 5
MAX_BATCH_BYTES = 64 << 20  # a larger element change goes through libnftables (the driver asks ``fits``)
_BATCH_HEAD = bytes((0, 0)) + NFNL_SUBSYS_NFTABLES.to_bytes(2, "big")  # nfgenmsg: AF_UNSPEC, v0, res_id


def _new_socket() -> socket.socket:
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC, NETLINK_NETFILTER)
    try:
        sock.bind((0, 0))
        set_buffers(sock, BUFFER)
        for option in (NETLINK_EXT_ACK, NETLINK_CAP_ACK):
            sock.setsockopt(SOL_NETLINK, option, 1)
    except BaseException:
        sock.close()
        raise
    return sock


def _error_text(err: int, kernel_message: str) -> str:
    name = errno.errorcode.get(err, str(err))
    return f"{os.strerror(err)} ({name}" + (f": {kernel_message})" if kernel_message else ")")


class DumpError(OSError):
    """The kernel refused a dump or a generation read (errno and its message), or did not finish one in time."""


class NfnlSocket:
    """One NETLINK_NETFILTER socket in namespace ``netns`` (None: the caller's namespace)."""

    def __init__(self, netns: str | None = None, *, timeout: float = 10.0) -> None:
        self.netns = netns
        if netns is None:
            self._sock = _new_socket()
        else:
            with in_netns(netns):
                self._sock = _new_socket()
        self._poll = select.poll()
        self._poll.register(self._sock.fileno(), select.POLLIN)
        self._timeout_ms = int(timeout * 1000)
        self._sndbuf = self._sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
        self._seq = 0
        self._buf = bytearray(1 << 20)

    def close(self) -> None:
        self._sock.close()

    @staticmethod
    def fits(requests: Sequence[tuple[int, bytes]]) -> bool:
        """Whether the batch is small enough to send (``MAX_BATCH_BYTES``)."""
        return sum(len(body) + 16 for _, body in requests) + 64 <= MAX_BATCH_BYTES

    def transaction(self, requests: Sequence[tuple[int, bytes]]) -> str | None:
        """Send ``(message type, body)`` requests as one batch; None when it was committed, else why not.

        The reason names the first failing request's index and the kernel's errno and message.
        """
        seq0 = self._seq + 1
        msgs = [message(NFNL_MSG_BATCH_BEGIN, NLM_F_REQUEST, _BATCH_HEAD, seq0)]
        for i, (kind, body) in enumerate(requests):
            flags = NLM_F_REQUEST | NLM_F_ACK | (NLM_F_CREATE if kind & 0xFF == NFT_MSG_NEWSETELEM else 0)
            msgs.append(message(kind, flags, body, seq0 + 1 + i))
        msgs.append(message(NFNL_MSG_BATCH_END, NLM_F_REQUEST, _BATCH_HEAD, seq0 + 1 + len(requests)))
        self._seq = (seq0 + 1 + len(requests)) & 0x7FFFFFFF
        data = b"".join(msgs)  # each message is already a multiple of 4 bytes (attributes are padded)
        if len(data) + 64 > self._sndbuf:  # one sendmsg must hold the batch: one skb, one transaction
            set_buffers(self._sock, len(data) + (1 << 16))
            self._sndbuf = self._sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
        self._sock.send(data)
        return self._outcome(seq0, len(requests))

    def _outcome(self, seq0: int, count: int) -> str | None:
        acks: dict[int, tuple[int, str]] = {}
        batch_error: tuple[int, str] | None = None
        while len(acks) < count:
            # A batch the kernel refused as a whole (its commit, or its framing) may have no per-request acks
            # after its error: every reply is queued before sendmsg returns, so then read what is there only.
            wait = 0 if batch_error is not None and batch_error[0] else self._timeout_ms
            if not self._poll.poll(wait):
                if wait == 0:
                    break
                return f"result unknown: {count - len(acks)} of {count} replies did not come within {wait} ms"
            try:
                size = self._sock.recv_into(self._buf, len(self._buf))
            except OSError as exc:
                if exc.errno == errno.ENOBUFS:
                    return "result unknown: the kernel's replies overflowed the receive buffer"
                raise
            for kind, flags, seq, offset, length in iter_messages(self._buf, size):
                if kind != NLMSG_ERROR:
                    continue
                reply = parse_error(self._buf, offset, length, flags)
                if seq == seq0:
                    batch_error = reply
                elif 0 < seq - seq0 <= count:
                    acks[seq - seq0 - 1] = reply
        failed = sorted((i, reply) for i, reply in acks.items() if reply[0])
        if failed:
            index, (err, text) = failed[0]
            return f"request {index + 1} of {count}: {_error_text(err, text)}"
        if batch_error is not None and batch_error[0]:
            return f"commit: {_error_text(*batch_error)}"
        return None

    # -- reads ---------------------------------------------------------------------------------------------------

    def _next_seq(self) -> int:
        self._seq = (self._seq + 1) & 0x7FFFFFFF
        return self._seq

    def _recv(self) -> int:
        if not self._poll.poll(self._timeout_ms):
            raise DumpError(errno.ETIMEDOUT, f"no reply from the kernel within {self._timeout_ms} ms")
        return self._sock.recv_into(self._buf, len(self._buf))

    def generation(self) -> int:
        """The ruleset's generation id (``NFT_MSG_GETGEN``): every committed transaction changes it."""
        seq = self._next_seq()
        self._sock.send(message(NFNL_SUBSYS_NFTABLES << 8 | NFT_MSG_GETGEN, NLM_F_REQUEST | NLM_F_ACK, bytes(4), seq))
        gen: int | None = None
        while True:
            size = self._recv()
            for kind, flags, mseq, offset, length in iter_messages(self._buf, size):
                if mseq != seq:
                    continue
                if kind == NLMSG_ERROR:
                    err, text = parse_error(self._buf, offset, length, flags)
                    if err:
                        raise DumpError(err, f"reading the ruleset generation: {_error_text(err, text)}")
                    if gen is None:
                        raise DumpError(errno.EPROTO, "the kernel acknowledged NFT_MSG_GETGEN without an answer")
                    return gen
                if kind & 0xFF == NFT_MSG_NEWGEN:
                    raw = attrs_of(bytes(self._buf[offset : offset + length]), NLMSGHDR.size + 4).get(NFTA_GEN_ID)
                    if raw is not None and len(raw) == 4:
                        gen = struct.unpack("!I", raw)[0]

    def dump(self, kind: int, body: bytes) -> list[bytes]:
        """Send one ``NLM_F_DUMP`` request; every reply message (headers included). A dump the kernel marks as
        interrupted (the ruleset changed under it) is read again, at most ``MAX_DUMP_ATTEMPTS`` times; a refusal
        raises ``DumpError`` with the kernel's errno (ENOENT: no such table or set)."""
        for _ in range(MAX_DUMP_ATTEMPTS):
            seq = self._next_seq()
            self._sock.send(message(kind, NLM_F_REQUEST | NLM_F_DUMP, body, seq))
            replies, interrupted = self._read_dump(seq)
            if not interrupted:
                return replies
        raise DumpError(errno.EINTR, f"the dump was interrupted {MAX_DUMP_ATTEMPTS} times in a row")

    def _read_dump(self, seq: int) -> tuple[list[bytes], bool]:
        replies: list[bytes] = []
        interrupted = False
        while True:
            size = self._recv()
            for kind, flags, mseq, offset, length in iter_messages(self._buf, size):
                if mseq != seq:
                    continue
                interrupted = interrupted or bool(flags & NLM_F_DUMP_INTR)
                if kind == NLMSG_DONE:
                    return replies, interrupted
                if kind == NLMSG_ERROR:
                    err, text = parse_error(self._buf, offset, length, flags)
                    if err == errno.EINTR:
                        return replies, True
                    raise DumpError(err, _error_text(err, text))
                replies.append(bytes(self._buf[offset : offset + length]))
