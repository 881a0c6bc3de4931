"""TokenReview and SubjectAccessReview through kubernetes-asyncio, for ``magw.daemons.egressgw.auth``.

Any failure to get an answer (the API server down, an error status, a timeout, an answer without a status) is
``ReviewUnavailable``: the API then refuses with 503, never allows.
"""

from __future__ import annotations

import asyncio

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from magw.daemons.egressgw.auth import ReviewUnavailable, User

REVIEW_TIMEOUT = 5.0
_FAILURES = (ApiException, aiohttp.ClientError, OSError, asyncio.TimeoutError, ValueError, AttributeError)


class KubeReviewer:
    def __init__(self, api: ApiClient, *, timeout: float = REVIEW_TIMEOUT) -> None:
        self._authn = client.AuthenticationV1Api(api)
        self._authz = client.AuthorizationV1Api(api)
        self.timeout = timeout

    async def token_review(self, token: str) -> User | None:
        body = client.V1TokenReview(spec=client.V1TokenReviewSpec(token=token))
        try:
            review = await self._authn.create_token_review(body, _request_timeout=self.timeout)
            status = review.status
            if status is None:
                raise ValueError("the TokenReview came back without a status")
            if not status.authenticated or status.user is None or not status.user.username:
                return None
            return User(str(status.user.username), tuple(str(g) for g in status.user.groups or ()))
        except _FAILURES as exc:
            raise ReviewUnavailable(" ".join(str(exc).split())[:200] or type(exc).__name__) from None

    async def access_review(self, user: User, attributes: dict[str, str]) -> bool:
        spec = client.V1SubjectAccessReviewSpec(
            user=user.name, groups=list(user.groups), resource_attributes=_resource_attributes(attributes)
        )
        body = client.V1SubjectAccessReview(spec=spec)
        try:
            review = await self._authz.create_subject_access_review(body, _request_timeout=self.timeout)
            if review.status is None:
                raise ValueError("the SubjectAccessReview came back without a status")
            return review.status.allowed is True
        except _FAILURES as exc:
            raise ReviewUnavailable(" ".join(str(exc).split())[:200] or type(exc).__name__) from None


def _resource_attributes(a: dict[str, str]) -> client.V1ResourceAttributes:
    return client.V1ResourceAttributes(
        group=a.get("group"), resource=a.get("resource"), verb=a.get("verb"),
        namespace=a.get("namespace") or None, name=a.get("name") or None,
    )  # fmt: skip
