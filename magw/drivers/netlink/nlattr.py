"""Netlink framing: message headers, attributes (TLVs) and acknowledgements, packed by hand.

Plain functions over ``bytes``; no socket, no pyroute2. Shared by the nexthop codec
(``nexthop.py``), the route codec (``routes.py``) and the raw socket (``rawsock.py``).
Everything is host byte order (netlink's), 4-byte aligned, as in ``linux/netlink.h``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

# struct nlmsghdr {u32 len; u16 type; u16 flags; u32 seq; u32 pid}
NLMSGHDR = struct.Struct("=IHHII")
# struct nlattr {u16 len; u16 type}
NLAHDR = struct.Struct("=HH")
U8 = struct.Struct("=B")
U16 = struct.Struct("=H")
U32 = struct.Struct("=I")
U64 = struct.Struct("=Q")
I32 = struct.Struct("=i")

NLMSG_NOOP = 1
NLMSG_ERROR = 2
NLMSG_DONE = 3
NLMSG_OVERRUN = 4

# Request flags.
NLM_F_REQUEST = 0x01
NLM_F_MULTI = 0x02
NLM_F_ACK = 0x04
NLM_F_DUMP_INTR = 0x10
NLM_F_DUMP_FILTERED = 0x20
NLM_F_ROOT = 0x100
NLM_F_MATCH = 0x200
NLM_F_DUMP = NLM_F_ROOT | NLM_F_MATCH
# Modifiers of NEW requests.
NLM_F_REPLACE = 0x100
NLM_F_EXCL = 0x200
NLM_F_CREATE = 0x400
NLM_F_APPEND = 0x800
# Flags of NLMSG_ERROR acknowledgements.
NLM_F_CAPPED = 0x100
NLM_F_ACK_TLVS = 0x200

NLA_F_NESTED = 0x8000
NLA_F_NET_BYTEORDER = 0x4000
NLA_TYPE_MASK = ~(NLA_F_NESTED | NLA_F_NET_BYTEORDER) & 0xFFFF

# Extended ack TLVs (enum nlmsgerr_attrs).
NLMSGERR_ATTR_MSG = 1
NLMSGERR_ATTR_OFFS = 2

NLMSG_ERROR_MIN = NLMSGHDR.size + I32.size


def align4(n: int) -> int:
    """Round ``n`` up to the netlink alignment (4 bytes)."""
    return (n + 3) & ~3


def attr(kind: int, payload: bytes) -> bytes:
    """One attribute: header, payload and padding to 4 bytes."""
    length = NLAHDR.size + len(payload)
    return NLAHDR.pack(length, kind) + payload + b"\0" * (align4(length) - length)


def attr_u8(kind: int, value: int) -> bytes:
    return NLAHDR.pack(5, kind) + U8.pack(value) + b"\0\0\0"


def attr_u16(kind: int, value: int) -> bytes:
    return NLAHDR.pack(6, kind) + U16.pack(value) + b"\0\0"


def attr_u32(kind: int, value: int) -> bytes:
    return NLAHDR.pack(8, kind) + U32.pack(value)


def attr_flag(kind: int) -> bytes:
    """An attribute without payload (a flag)."""
    return NLAHDR.pack(4, kind)


def attr_nested(kind: int, *children: bytes) -> bytes:
    """A nested attribute, marked with ``NLA_F_NESTED`` as strict kernel parsers require."""
    return attr(kind | NLA_F_NESTED, b"".join(children))


def message(kind: int, flags: int, body: bytes, seq: int = 0) -> bytes:
    """A whole netlink message. ``pid`` is 0 (the kernel); ``seq`` is usually stamped later by the socket."""
    return NLMSGHDR.pack(NLMSGHDR.size + len(body), kind, flags, seq, 0) + body


class MalformedMessage(ValueError):
    """A netlink message our decoders cannot read (truncated, an attribute of the wrong size, a bad address);
    ``str()`` is one line: ``RTM_NEWROUTE: malformed message (N bytes): reason``. The kernel never sends one."""

    def __init__(self, kind: str, msg: bytes, reason: object) -> None:
        super().__init__(f"{kind}: malformed message ({len(msg)} bytes): {' '.join(str(reason).split())}")


def iter_attrs(buf: bytes, start: int, end: int) -> Iterator[tuple[int, bytes]]:
    """Yield ``(type, payload)`` for each attribute in ``buf[start:end]``; the type has its flag bits masked off.

    A truncated trailing attribute ends the iteration (the kernel never sends one).
    """
    pos = start
    end = min(end, len(buf))  # a message whose header claims more than was received: read what is there
    while pos + NLAHDR.size <= end:
        length, kind = NLAHDR.unpack_from(buf, pos)
        if length < NLAHDR.size or pos + length > end:
            return
        yield kind & NLA_TYPE_MASK, buf[pos + NLAHDR.size : pos + length]
        pos += align4(length)


def attrs_of(buf: bytes, start: int, end: int | None = None) -> dict[int, bytes]:
    """The attributes of ``buf[start:end]`` by type (the last one wins if a type repeats).

    A plain loop rather than ``dict(iter_attrs(...))``: this runs once per dumped route.
    """
    stop = len(buf) if end is None else min(end, len(buf))
    out: dict[int, bytes] = {}
    unpack = NLAHDR.unpack_from
    pos = start
    while pos + 4 <= stop:
        length, kind = unpack(buf, pos)
        if length < 4 or pos + length > stop:
            break
        out[kind & NLA_TYPE_MASK] = buf[pos + 4 : pos + length]
        pos += (length + 3) & ~3
    return out


def iter_messages(buf: bytes | bytearray | memoryview, size: int) -> Iterator[tuple[int, int, int, int, int]]:
    """Yield ``(type, flags, seq, offset, length)`` for each message in the first ``size`` bytes of ``buf``."""
    pos = 0
    while pos + NLMSGHDR.size <= size:
        length, kind, flags, seq, _pid = NLMSGHDR.unpack_from(buf, pos)
        if length < NLMSGHDR.size or pos + length > size:
            return
        yield kind, flags, seq, pos, length
        pos += align4(length)


def parse_error(buf: bytes | bytearray | memoryview, offset: int, length: int, flags: int) -> tuple[int, str]:
    """Decode an ``NLMSG_ERROR`` message at ``offset``: ``(errno, kernel message)``; errno 0 is a plain ack.

    The payload is ``int error`` then the request's header (only the header when the
    ack is ``NLM_F_CAPPED``, else the whole request), then extended-ack TLVs when
    ``NLM_F_ACK_TLVS`` is set.
    """
    if length < NLMSG_ERROR_MIN or offset + length > len(buf):
        return 0, ""
    (error,) = I32.unpack_from(buf, offset + NLMSGHDR.size)
    text = ""
    if flags & NLM_F_ACK_TLVS:
        inner = offset + NLMSGHDR.size + I32.size
        if flags & NLM_F_CAPPED:
            tlv_start = inner + NLMSGHDR.size
        else:
            (inner_len,) = U32.unpack_from(buf, inner) if inner + U32.size <= offset + length else (length,)
            tlv_start = inner + align4(inner_len)
        tlvs = attrs_of(bytes(buf[tlv_start : offset + length]), 0)
        raw = tlvs.get(NLMSGERR_ATTR_MSG, b"")
        text = raw.split(b"\0", 1)[0].decode("utf-8", "replace")
    return -error, text
