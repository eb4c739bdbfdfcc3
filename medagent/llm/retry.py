"""The one retry loop of every remote call (LLM over HTTP or a Serve handle, retrieval, reranking).

Only failures of the transport or of the cluster are retried: a timeout, a lost connection, a replica
that died or is being replaced, an overloaded proxy. An exception raised by code (ours here, or inside a
replica, which Ray hands back as ``RayTaskError``) is a bug or a refusal and propagates at once: retrying
it would only hide it behind back-off.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from medagent.llm.base import LLMError

T = TypeVar("T")

# Libraries whose own exception types mean "the transport or the cluster failed" (never imported here).
_TRANSPORT_PACKAGES = frozenset({"ray", "aiohttp", "httpx"})


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` is worth another try (see the module docstring)."""
    if isinstance(exc, (TimeoutError, ConnectionError)):  # asyncio.TimeoutError is TimeoutError
        return True
    cls = type(exc)
    return cls.__module__.split(".")[0] in _TRANSPORT_PACKAGES and not cls.__name__.startswith("RayTaskError")


async def with_retries(
    call: Callable[[], Awaitable[T]],
    *,
    what: str,
    max_retries: int,
    backoff_s: float,
    retryable: Callable[[BaseException], bool] = is_transient,
    error: type[LLMError] = LLMError,
) -> T:
    """``await call()``, retried up to ``max_retries`` times with doubling back-off while the failure is
    ``retryable``; then ``error`` (an ``LLMError``: the worker records it against the question)."""
    delay = backoff_s
    last: BaseException | None = None
    for attempt in range(max_retries + 1):
        try:
            return await call()
        except Exception as exc:  # sorted right below: only transient failures stay in the loop
            if not retryable(exc):
                raise
            last = exc
        if attempt < max_retries:
            await asyncio.sleep(delay)
            delay *= 2
    raise error(f"{what} failed after {max_retries + 1} attempts: {last!r}") from last
