"""Who may use magw-egress's TCP API: bearer tokens checked by the API server (docs/egress-gateway.md, "API").

As kube-rbac-proxy does: the token of ``Authorization: Bearer TOKEN`` goes to a TokenReview
(authentication.k8s.io/v1), and every action to a SubjectAccessReview (authorization.k8s.io/v1) for the user and
groups the review gave, against the ``egressvips`` resource of group ``submariner.io``:

====================================  =======  ==============  ==================================================
request                               verb     name            namespace
====================================  =======  ==============  ==================================================
POST /vip bind (namespace NS)         bind     the VIP's name  NS: a Role in NS grants NS's own bindings only
POST /vip unbind (namespace NS)       unbind   the VIP's name  NS
POST /vip notify                      notify   the VIP's name  the namespace of the EgressVIP objects
POST /master_notify                   report   the VIP's name  the namespace of the EgressVIP objects, and the
                                                               user must be one of the agents' identities
GET /vip                              list     (none)          the namespace of the EgressVIP objects
GET /vip/NAME                         get      NAME            the namespace of the EgressVIP objects
====================================  =======  ==============  ==================================================

401: no token, not a bearer token, or the TokenReview said not authenticated. 403: the review said not allowed
(or master_notify from another identity). 503: the API server could not be asked (fail closed: never allowed).
Answers are cached for ``ttl`` seconds (allowed and refused alike), at most ``max_entries`` of each kind.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Hashable, Iterable
from typing import Any, Protocol

import attrs

GROUP = "submariner.io"
RESOURCE = "egressvips"


class Refused(Exception):
    """A request the API must not serve: ``status`` 401, 403 or 503, a one-line message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class ReviewUnavailable(Exception):
    """The API server could not answer a review (unreachable, an error status, a malformed answer)."""


@attrs.frozen
class User:
    name: str
    groups: tuple[str, ...]


@attrs.frozen
class Access:
    """One SubjectAccessReview's resourceAttributes (group and resource are always submariner.io egressvips)."""

    verb: str
    namespace: str
    name: str = ""

    def attributes(self) -> dict[str, str]:
        out = {"group": GROUP, "resource": RESOURCE, "verb": self.verb, "namespace": self.namespace}
        if self.name:
            out["name"] = self.name
        return out


class Reviewer(Protocol):
    """The API server's two reviews (``magw.daemons.egressgw.reviews`` over kubernetes-asyncio)."""

    async def token_review(self, token: str) -> User | None: ...

    async def access_review(self, user: User, attributes: dict[str, str]) -> bool: ...


class _Cache:
    def __init__(self, ttl: float, max_entries: int) -> None:
        self.ttl = ttl
        self.max_entries = max_entries
        self._entries: OrderedDict[Hashable, tuple[float, Any]] = OrderedDict()

    def get(self, key: Hashable) -> tuple[bool, Any]:
        hit = self._entries.get(key)
        if hit is None or hit[0] < time.monotonic():
            self._entries.pop(key, None)
            return False, None
        return True, hit[1]

    def put(self, key: Hashable, value: Any) -> None:
        self._entries[key] = (time.monotonic() + self.ttl, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)


def bearer_token(header: str | None) -> str:
    """The token of an ``Authorization`` header; Refused(401) when there is none."""
    if not header:
        raise Refused(401, "no bearer token: send Authorization: Bearer TOKEN")
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Refused(401, "the Authorization header is not a bearer token")
    return token.strip()


class KubeAuth:
    """Authentication and authorization delegated to the API server, cached briefly and bounded."""

    def __init__(
        self,
        reviewer: Reviewer,
        *,
        agent_users: Iterable[str],
        ttl: float = 10.0,
        max_entries: int = 1024,
    ) -> None:
        self.reviewer = reviewer
        self.agent_users = frozenset(agent_users)
        self._tokens = _Cache(ttl, max_entries)
        self._access = _Cache(ttl, max_entries)

    async def authenticate(self, header: str | None) -> User:
        token = bearer_token(header)
        hit, user = self._tokens.get(token)
        if not hit:
            try:
                user = await self.reviewer.token_review(token)
            except ReviewUnavailable as exc:
                raise Refused(503, f"cannot review the token: {exc}") from None
            self._tokens.put(token, user)
        if user is None:
            raise Refused(401, "the token is not valid")
        assert isinstance(user, User)
        return user

    async def authorize(self, user: User, access: Access, *, agent_only: bool = False) -> None:
        if agent_only and user.name not in self.agent_users:
            raise Refused(403, f"{user.name} is not an egress agent's identity: master_notify refused")
        attributes = access.attributes()
        key = (user, tuple(sorted(attributes.items())))
        hit, allowed = self._access.get(key)
        if not hit:
            try:
                allowed = await self.reviewer.access_review(user, attributes)
            except ReviewUnavailable as exc:
                raise Refused(503, f"cannot review the access: {exc}") from None
            self._access.put(key, allowed)
        if allowed is not True:
            where = f" in namespace {access.namespace}" if access.namespace else ""
            target = f" {access.name}" if access.name else ""
            raise Refused(403, f"{user.name} may not {access.verb} {GROUP} {RESOURCE}{target}{where}")
