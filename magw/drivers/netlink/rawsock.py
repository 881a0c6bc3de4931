"""A raw NETLINK_ROUTE socket bound to a network namespace, for pre-packed messages in big batches.

``RawNetlink(netns)`` enters namespace NAME in the current thread only
(``magw.drivers.netns.in_netns``), creates the socket, and returns to the original
namespace, whatever happens. The socket stays in the target namespace for its whole
life. A missing namespace, or a path that is not one, is an error (``NoSuchNetns``);
nothing is ever created.

``transact`` sends many requests per ``sendmsg``. Each request carries ``NLM_F_ACK`` and a
unique sequence number; the kernel handles the messages of one ``sendmsg`` in order, in
the sender's context, so when ``sendmsg`` returns every ack is already queued (or was
dropped because the receive buffer was full). The number of messages in flight is bounded
(``window``) so the acks fit the receive buffer; if acks are lost anyway (ENOBUFS), the
messages from the first lost ack on are sent again in smaller windows. That is safe
because every request we send is idempotent or reports a harmless error on repetition
(EEXIST for an exclusive create, ENOENT/ESRCH for a delete).

``transact_errors`` is the same protocol with the acks of success left out: only the last request of a
batch carries ``NLM_F_ACK``, and the kernel answers any other request only when it fails (``netlink_rcv_skb``
acks a request when it asked for it *or* when it failed). The last request's ack is the barrier: the replies of
one socket are queued in order, so once it is read, every failure of the batch has been read too and the
requests without a reply succeeded. Shaped for speed (docs/performance.md): reading and parsing 100k acks was about
0.8 s of a 100k-route ``magw apply``, as much as the kernel's own work. Fail closed: when the receive buffer
overflowed (ENOBUFS) or the barrier never came, a request without a reply is reported as ENOBUFS, "result
unknown", never as a success, and it is not sent again (an exclusive create that did succeed would then
fail with EEXIST).

Not thread-safe: one socket per thread.
"""

from __future__ import annotations

import errno
import os
import select
import socket
import struct
from collections.abc import Sequence
from types import TracebackType

import attrs
import structlog

from magw.drivers.netlink.nlattr import (
    I32,
    NLM_F_ACK,
    NLM_F_DUMP_INTR,
    NLMSG_DONE,
    NLMSG_ERROR,
    NLMSGHDR,
    U32,
    iter_messages,
    parse_error,
)
from magw.drivers.netns import in_netns

log = structlog.get_logger(__name__)

SOL_NETLINK = 270
NETLINK_CAP_ACK = 10  # acks carry only the request's header, not the whole request
NETLINK_EXT_ACK = 11  # acks carry the kernel's error message
NETLINK_GET_STRICT_CHK = 12  # dump requests' headers act as filters (kernel >= 4.20)
SO_SNDBUFFORCE = 32
SO_RCVBUFFORCE = 33

DEFAULT_BUFFER = 16 << 20
# Receive-buffer charge of one queued ack (skb truesize, rounded up; ~0.8 KiB on x86-64 6.x).
ACK_CHARGE = 1024
MAX_WINDOW = 2048
MAX_BATCH_BYTES = 1 << 20
MAX_STALLS = 12
MAX_DUMP_ATTEMPTS = 5
RECV_BUFFER = 1 << 20

# (type, flags, seq) at offset 4 of struct nlmsghdr
_TYPE_FLAGS_SEQ = struct.Struct("=HHI")


class NetlinkError(OSError):
    """The kernel refused a request: ``errno`` plus its extended-ack message when it gave one."""

    def __init__(self, err: int, kernel_message: str = "") -> None:
        name = errno.errorcode.get(err, str(err))
        text = f"{name}: {os.strerror(err)}" + (f" ({kernel_message})" if kernel_message else "")
        super().__init__(err, text)
        self.kernel_message = kernel_message


@attrs.frozen(kw_only=True)
class Ack:
    """The kernel's answer to one request: ``errno`` 0 is success; ``message`` is the extended ack text."""

    errno: int
    message: str = ""


_OK = Ack(errno=0)
_UNKNOWN = Ack(errno=errno.ENOBUFS, message="result unknown: the kernel's replies overflowed or never came")


def set_buffers(sock: socket.socket, size: int) -> None:
    """SO_SNDBUF and SO_RCVBUF of ``size``; the FORCE variants ignore net.core.[rw]mem_max (CAP_NET_ADMIN), and
    without that capability the capped ones are used."""
    for plain, force in ((socket.SO_SNDBUF, SO_SNDBUFFORCE), (socket.SO_RCVBUF, SO_RCVBUFFORCE)):
        try:
            sock.setsockopt(socket.SOL_SOCKET, force, size)
        except PermissionError:
            sock.setsockopt(socket.SOL_SOCKET, plain, size)


def _tune(sock: socket.socket, size: int) -> None:
    set_buffers(sock, size)
    for option in (NETLINK_EXT_ACK, NETLINK_CAP_ACK, NETLINK_GET_STRICT_CHK):
        try:
            sock.setsockopt(SOL_NETLINK, option, 1)
        except OSError as exc:
            log.debug("netlink.sockopt_unsupported", option=option, errno=errno.errorcode.get(exc.errno or 0, ""))


def _new_socket(size: int) -> socket.socket:
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC, socket.NETLINK_ROUTE)
    try:
        sock.bind((0, 0))
        _tune(sock, size)
    except BaseException:
        sock.close()
        raise
    return sock


def _socket_in(netns: str, size: int) -> socket.socket:
    with in_netns(netns):
        return _new_socket(size)


class RawNetlink:
    """A NETLINK_ROUTE socket in namespace ``netns`` (None: the caller's namespace).

    ``buffer_size``: SO_SNDBUF/SO_RCVBUF to ask for. ``window``: most requests in flight
    (default: what the receive buffer holds in acks, at most 2048). ``timeout``: seconds to
    wait for a dump's next part.
    """

    def __init__(
        self,
        netns: str | None = None,
        *,
        buffer_size: int = DEFAULT_BUFFER,
        window: int | None = None,
        timeout: float = 30.0,
    ) -> None:
        if window is not None and window < 1:
            raise ValueError(f"window: must be at least 1, got {window}")
        self.netns = netns
        sock = _socket_in(netns, buffer_size) if netns is not None else _new_socket(buffer_size)
        self._attach(sock, window, timeout)

    @classmethod
    def from_socket(cls, sock: socket.socket, *, window: int | None = None, timeout: float = 30.0) -> RawNetlink:
        """Wrap an open datagram socket: a netlink socket made elsewhere, or one end of a
        ``socketpair`` that plays the kernel in tests. The RawNetlink owns it from now on."""
        if window is not None and window < 1:
            raise ValueError(f"window: must be at least 1, got {window}")
        self = cls.__new__(cls)
        self.netns = None
        self._attach(sock, window, timeout)
        return self

    def _attach(self, sock: socket.socket, window: int | None, timeout: float) -> None:
        self._sock = sock
        self._poll = select.poll()
        self._poll.register(sock.fileno(), select.POLLIN)
        self._buf = bytearray(RECV_BUFFER)
        self._seq = 0
        self._timeout_ms = int(timeout * 1000)
        rcvbuf = sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        # One sendmsg is one skb, refused with EMSGSIZE above SO_SNDBUF - 32.
        self._batch_bytes = min(MAX_BATCH_BYTES, sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) - 64)
        self.window = window if window is not None else max(8, min(MAX_WINDOW, rcvbuf // ACK_CHARGE))

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        self._sock.close()

    def fileno(self) -> int:
        return self._sock.fileno()

    def __enter__(self) -> RawNetlink:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- requests with acks ----------------------------------------------------------------

    def transact(self, msgs: Sequence[bytes]) -> list[int]:
        """Send pre-packed requests in order; return the errno of each (0 = success), in order."""
        return [ack.errno for ack in self.transact_ext(msgs)]

    def transact_ext(self, msgs: Sequence[bytes]) -> list[Ack]:
        """Like ``transact``, with the kernel's extended-ack message of each failure."""
        results: list[Ack] = []
        stalls = 0
        start = 0
        while start < len(msgs):
            end = self._batch_end(msgs, start, self.window, self._batch_bytes)
            acks, _ = self._send_batch(msgs[start:end])
            first_lost = next((i for i, ack in enumerate(acks) if ack is None), len(acks))
            results.extend(a for a in acks[:first_lost] if a is not None)
            start += first_lost
            if first_lost == len(acks):
                stalls = 0
                continue
            # Acks were dropped: the receive buffer holds fewer than `window`. Learn a smaller
            # window and send again from the first lost one. Each round either makes progress
            # or counts as a stall, so this ends.
            stalls = 0 if first_lost else stalls + 1
            self.window = max(1, self.window // 2)
            log.warning("netlink.acks_lost", lost=sum(a is None for a in acks), resend_from=start, window=self.window)
            if stalls > MAX_STALLS:
                results.extend(Ack(errno=errno.ENOBUFS, message="acknowledgement lost") for _ in msgs[start:])
                break
        return results

    def transact_errors(self, msgs: Sequence[bytes]) -> list[Ack]:
        """Like ``transact_ext`` with only the failures answered (see the module's docstring): one ack per batch.

        A request whose result cannot be known (the receive buffer overflowed, or the batch's barrier ack did
        not come in time) is reported as ``Ack(ENOBUFS, "result unknown ...")``, never as a success.
        """
        results: list[Ack] = []
        start = 0
        while start < len(msgs):
            end = self._batch_end(msgs, start, self.window, self._batch_bytes)
            acks, complete = self._send_batch(msgs[start:end], errors_only=True)
            if not complete:
                unknown = sum(a is None for a in acks)
                self.window = max(1, self.window // 2)
                log.warning("netlink.results_unknown", requests=unknown, window=self.window)
            results.extend(a if a is not None else (_OK if complete else _UNKNOWN) for a in acks)
            start = end
        return results

    @staticmethod
    def _batch_end(msgs: Sequence[bytes], start: int, window: int, max_bytes: int) -> int:
        end = min(len(msgs), start + window)
        size = 0
        for i in range(start, end):
            size += len(msgs[i])
            if size > max_bytes and i > start:
                return i
        return end

    def _next_seqs(self, count: int) -> int:
        first = (self._seq + 1) & 0xFFFFFFFF
        self._seq = (self._seq + count) & 0xFFFFFFFF
        return first

    def _stamp(self, msgs: Sequence[bytes], seq0: int, *, ack_last_only: bool = False) -> bytearray:
        """Join ``msgs`` into one buffer, each padded to 4 bytes, with sequence ``seq0 + i`` and the ack flag
        (on every message, or with ``ack_last_only`` on the last one only)."""
        if any(len(m) & 3 for m in msgs):
            msgs = [m + b"\0" * (-len(m) & 3) for m in msgs]
        buf = bytearray(b"".join(msgs))
        pos = 0
        last = len(msgs) - 1
        for i in range(len(msgs)):
            kind, flags, _ = _TYPE_FLAGS_SEQ.unpack_from(buf, pos + 4)
            if ack_last_only and i != last:
                flags &= ~NLM_F_ACK
            else:
                flags |= NLM_F_ACK
            _TYPE_FLAGS_SEQ.pack_into(buf, pos + 4, kind, flags, (seq0 + i) & 0xFFFFFFFF)
            pos += (U32.unpack_from(buf, pos)[0] + 3) & ~3
        return buf

    def _send_batch(self, msgs: Sequence[bytes], *, errors_only: bool = False) -> tuple[list[Ack | None], bool]:
        """Send one batch; the replies by position (None: none read) and whether none can be missing.

        ``errors_only``: only the last message asks for an ack, the barrier (``transact_errors``).
        """
        seq0 = self._next_seqs(len(msgs))
        self._sock.send(self._stamp(msgs, seq0, ack_last_only=errors_only))
        acks: list[Ack | None] = [None] * len(msgs)
        complete = self._collect_acks(seq0, acks, barrier=len(msgs) - 1 if errors_only else None)
        return acks, complete

    def _collect_acks(self, seq0: int, acks: list[Ack | None], *, barrier: int | None = None) -> bool:
        """Read acks into ``acks`` until every one came (or, with ``barrier``, until that one came).

        Returns True when that happened with no reply lost on the way (no ENOBUFS).
        """
        pending = len(acks) if barrier is None else 1
        overrun = False
        while pending:
            try:
                size = self._sock.recv_into(self._buf, len(self._buf), socket.MSG_DONTWAIT)
            except BlockingIOError:
                # Acks of a batch are queued before sendmsg returns: an empty queue after an
                # overrun means the rest were dropped. Without an overrun, wait a bounded time.
                if overrun or not self._poll.poll(min(self._timeout_ms, 5000)):
                    return False
                continue
            except OSError as exc:
                if exc.errno != errno.ENOBUFS:
                    raise
                overrun = True
                continue
            taken = self._take_acks(size, seq0, acks)
            pending = pending - taken if barrier is None else int(acks[barrier] is None)
        return not overrun

    def _take_acks(self, size: int, seq0: int, acks: list[Ack | None]) -> int:
        taken = 0
        buf = self._buf
        count = len(acks)
        for kind, flags, seq, offset, length in iter_messages(buf, size):
            index = (seq - seq0) & 0xFFFFFFFF
            if kind != NLMSG_ERROR or index >= count or acks[index] is not None:
                continue
            err, text = parse_error(buf, offset, length, flags)
            acks[index] = Ack(errno=err, message=text)
            taken += 1
        return taken

    # -- dumps -----------------------------------------------------------------------------

    def dump(self, msg: bytes) -> list[bytes]:
        """Send one NLM_F_DUMP request; return every reply message (headers included).

        A dump flagged NLM_F_DUMP_INTR (the kernel's table changed under it) is retried,
        at most 5 times, then NetlinkError(EINTR). A kernel error raises NetlinkError.
        """
        for attempt in range(1, MAX_DUMP_ATTEMPTS + 1):
            seq = self._next_seqs(1)
            buf = bytearray(msg)
            kind, flags, _ = _TYPE_FLAGS_SEQ.unpack_from(buf, 4)
            _TYPE_FLAGS_SEQ.pack_into(buf, 4, kind, flags, seq)
            self._sock.send(buf)
            replies, interrupted = self._read_dump(seq)
            if not interrupted:
                return replies
            log.info("netlink.dump_interrupted", attempt=attempt, msg_type=kind)
        raise NetlinkError(errno.EINTR, f"dump interrupted {MAX_DUMP_ATTEMPTS} times in a row")

    def _read_dump(self, seq: int) -> tuple[list[bytes], bool]:
        replies: list[bytes] = []
        interrupted = False
        while True:
            if not self._poll.poll(self._timeout_ms):
                raise TimeoutError(f"netlink: no dump reply within {self._timeout_ms} ms")
            try:
                size = self._sock.recv_into(self._buf)
            except OSError as exc:
                if exc.errno != errno.ENOBUFS:
                    raise
                interrupted = True
                continue
            for kind, flags, mseq, offset, length in iter_messages(self._buf, size):
                if mseq != seq:
                    continue
                interrupted = interrupted or bool(flags & NLM_F_DUMP_INTR)
                if kind == NLMSG_DONE:
                    return replies, self._done_interrupted(offset, length) or interrupted
                if kind == NLMSG_ERROR:
                    err, text = parse_error(self._buf, offset, length, flags)
                    if err == errno.EINTR:
                        return replies, True
                    if err:
                        raise NetlinkError(err, text)
                    continue
                replies.append(bytes(self._buf[offset : offset + length]))

    def _done_interrupted(self, offset: int, length: int) -> bool:
        """NLMSG_DONE carries the dump's status: 0, -EINTR (interrupted) or another error (raised)."""
        if length < NLMSGHDR.size + I32.size:
            return False
        status: int = I32.unpack_from(self._buf, offset + NLMSGHDR.size)[0]
        if status < 0 and -status != errno.EINTR:
            raise NetlinkError(-status)
        return status == -errno.EINTR
