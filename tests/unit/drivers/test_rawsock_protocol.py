"""RawNetlink's ack and dump protocol against a scripted peer (no kernel, no namespace).

One end of a datagram ``socketpair`` plays the kernel: replies are queued on it before the
call, so the tests pin down sequence matching, resending after lost acks, dump retries on
NLM_F_DUMP_INTR and error reporting, none of which the kernel produces on demand.
"""

from __future__ import annotations

import errno
import socket
import struct
import threading
from collections.abc import Iterator

import pytest

from magw.drivers.netlink import nlattr
from magw.drivers.netlink.rawsock import MAX_DUMP_ATTEMPTS, NetlinkError, RawNetlink

RTM_NEWROUTE = 24


@pytest.fixture
def pair() -> Iterator[tuple[RawNetlink, socket.socket]]:
    ours, kernel = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    nl = RawNetlink.from_socket(ours, window=3, timeout=0.05)
    try:
        yield nl, kernel
    finally:
        nl.close()
        kernel.close()


def ack(seq: int, error: int = 0, text: str = "") -> bytes:
    flags = nlattr.NLM_F_CAPPED | (nlattr.NLM_F_ACK_TLVS if text else 0)
    request_header = nlattr.NLMSGHDR.pack(16, RTM_NEWROUTE, 0, seq, 0)
    tlvs = nlattr.attr(nlattr.NLMSGERR_ATTR_MSG, text.encode() + b"\0") if text else b""
    return nlattr.message(nlattr.NLMSG_ERROR, flags, struct.pack("=i", -error) + request_header + tlvs, seq)


def reply(seq: int, payload: bytes, flags: int = nlattr.NLM_F_MULTI) -> bytes:
    return nlattr.message(RTM_NEWROUTE, flags, payload, seq)


def done(seq: int, status: int = 0) -> bytes:
    return nlattr.message(nlattr.NLMSG_DONE, nlattr.NLM_F_MULTI, struct.pack("=i", status), seq)


def request(tag: bytes) -> bytes:
    return nlattr.message(RTM_NEWROUTE, nlattr.NLM_F_REQUEST, tag)


def sent_seqs(kernel: socket.socket) -> list[list[tuple[int, int, bytes]]]:
    """Every datagram the RawNetlink sent, as (seq, flags, payload) per message."""
    out = []
    while True:
        try:
            data = kernel.recv(1 << 16, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return out
        out.append([(s, f, data[o + 16 : o + n]) for _k, f, s, o, n in nlattr.iter_messages(data, len(data))])


def test_transact_matches_acks_by_sequence(pair: tuple[RawNetlink, socket.socket]) -> None:
    """Acks arriving out of order, plus a stray ack of an old sequence, map to the right requests."""
    nl, kernel = pair
    kernel.send(ack(2, errno.EEXIST, "Route exists") + ack(99) + ack(1) + ack(3))  # seqs 1-3 are the first sent
    acks = nl.transact_ext([request(b"aaaa"), request(b"bbbb"), request(b"cccc")])
    assert [(a.errno, a.message) for a in acks] == [(0, ""), (errno.EEXIST, "Route exists"), (0, "")]
    (batch,) = sent_seqs(kernel)
    assert [(seq, flags & nlattr.NLM_F_ACK, body) for seq, flags, body in batch] == [
        (1, nlattr.NLM_F_ACK, b"aaaa"),
        (2, nlattr.NLM_F_ACK, b"bbbb"),
        (3, nlattr.NLM_F_ACK, b"cccc"),
    ]


def answer_batches(kernel: socket.socket, answers: list[dict[int, int | None]]) -> threading.Thread:
    """Play the kernel in a thread: for the n-th datagram received, ack the message at position i with
    ``answers[n][i]`` (an errno; None drops the ack). Stops after the last scripted datagram or 5 s."""

    def serve() -> None:
        kernel.settimeout(5)
        for script in answers:
            data = kernel.recv(1 << 16)
            seqs = [seq for _k, _f, seq, _o, _n in nlattr.iter_messages(data, len(data))]
            kernel.send(b"".join(ack(seq, script[i]) for i, seq in enumerate(seqs) if script.get(i, 0) is not None))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread


def test_lost_acks_are_resent_from_the_first_lost_in_smaller_windows(pair: tuple[RawNetlink, socket.socket]) -> None:
    """When the ack of message 2 of 3 never comes, message 1's result is kept, the window halves to 1, and
    messages 2 and 3 are sent again one by one; their new acks give the results."""
    nl, kernel = pair
    peer = answer_batches(kernel, [{0: 0, 1: None, 2: 0}, {0: errno.ENOENT}, {0: 0}])
    results = nl.transact([request(b"m1.."), request(b"m2.."), request(b"m3..")])
    peer.join(timeout=10)
    assert results == [0, errno.ENOENT, 0]
    assert nl.window == 1


def test_unaligned_messages_are_padded_in_a_batch(pair: tuple[RawNetlink, socket.socket]) -> None:
    """A message whose length is not a multiple of 4 is padded, so the next one starts where the kernel looks."""
    nl, kernel = pair
    kernel.send(ack(1) + ack(2))
    assert nl.transact([request(b"abc"), request(b"defg")]) == [0, 0]
    (batch,) = sent_seqs(kernel)
    assert [(seq, body) for seq, _f, body in batch] == [(1, b"abc"), (2, b"defg")]


def test_acks_that_never_come_end_as_enobufs(pair: tuple[RawNetlink, socket.socket]) -> None:
    """A peer that never answers does not hang transact: after bounded stalls each request reports ENOBUFS."""
    nl, _kernel = pair
    assert nl.transact([request(b"m1..")]) == [errno.ENOBUFS]


def test_dump_collects_multipart_replies_of_its_sequence(pair: tuple[RawNetlink, socket.socket]) -> None:
    """A dump returns the messages of its own sequence, across datagrams, up to NLMSG_DONE; strays are ignored."""
    nl, kernel = pair
    kernel.send(reply(1, b"one.") + reply(7, b"stray...") + reply(1, b"two."))
    kernel.send(reply(1, b"three...") + done(1))
    assert [m[16:] for m in nl.dump(request(b"dump"))] == [b"one.", b"two.", b"three..."]


def test_interrupted_dump_is_retried(pair: tuple[RawNetlink, socket.socket]) -> None:
    """A dump flagged NLM_F_DUMP_INTR is thrown away and asked again; the clean second dump is returned."""
    nl, kernel = pair
    kernel.send(reply(1, b"old.", nlattr.NLM_F_MULTI | nlattr.NLM_F_DUMP_INTR) + done(1))
    kernel.send(reply(2, b"new.") + done(2))
    assert [m[16:] for m in nl.dump(request(b"dump"))] == [b"new."]
    assert [batch[0][0] for batch in sent_seqs(kernel)] == [1, 2]


def test_dump_interrupted_every_time_gives_up(pair: tuple[RawNetlink, socket.socket]) -> None:
    """A dump interrupted on every attempt (here via NLMSG_DONE carrying -EINTR) raises EINTR after 5 tries."""
    nl, kernel = pair
    for seq in range(1, MAX_DUMP_ATTEMPTS + 1):
        kernel.send(reply(seq, b"part") + done(seq, -errno.EINTR))
    with pytest.raises(NetlinkError) as info:
        nl.dump(request(b"dump"))
    assert info.value.errno == errno.EINTR


def test_dump_error_is_raised_with_the_kernel_message(pair: tuple[RawNetlink, socket.socket]) -> None:
    """An NLMSG_ERROR answer to a dump raises NetlinkError with the errno name and the extended-ack text."""
    nl, kernel = pair
    kernel.send(ack(1, errno.EINVAL, "Invalid values in header for nexthop dump request"))
    with pytest.raises(NetlinkError, match=r"^\[Errno 22\] EINVAL: Invalid argument \(Invalid values in header"):
        nl.dump(request(b"dump"))


def test_window_must_be_positive() -> None:
    """A zero window is refused with one line naming the field."""
    ours, kernel = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    with ours, kernel, pytest.raises(ValueError, match=r"^window: must be at least 1, got 0$"):
        RawNetlink.from_socket(ours, window=0)


def test_errors_only_acks_the_last_and_maps_failures_by_sequence(pair: tuple[RawNetlink, socket.socket]) -> None:
    """transact_errors: only the last message of a batch carries NLM_F_ACK; a failure's reply lands on its own
    message, messages with no reply succeeded once the barrier (the last one's ack) came."""
    nl, kernel = pair  # window 3: one batch of three
    kernel.send(ack(2, errno.EEXIST, "Route exists") + ack(3))
    acks = nl.transact_errors([request(b"aaaa"), request(b"bbbb"), request(b"cccc")])
    assert [(a.errno, a.message) for a in acks] == [(0, ""), (errno.EEXIST, "Route exists"), (0, "")]
    (batch,) = sent_seqs(kernel)
    assert [(seq, flags & nlattr.NLM_F_ACK) for seq, flags, _ in batch] == [(1, 0), (2, 0), (3, nlattr.NLM_F_ACK)]


def test_errors_only_without_the_barrier_reports_results_unknown(pair: tuple[RawNetlink, socket.socket]) -> None:
    """A batch whose barrier ack never comes does not hang, and its unanswered messages are not successes:
    ENOBUFS "result unknown"; a failure that did come keeps its own errno."""
    nl, kernel = pair
    kernel.send(ack(1, errno.EINVAL))
    acks = nl.transact_errors([request(b"aaaa"), request(b"bbbb"), request(b"cccc")])
    assert [a.errno for a in acks] == [errno.EINVAL, errno.ENOBUFS, errno.ENOBUFS]
    assert acks[1].message.startswith("result unknown")
