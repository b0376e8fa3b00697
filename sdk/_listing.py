"""The iterators ``list_workflows`` and ``list_schedules`` return, shaped as Temporal's.

``client.list_workflows(q)`` is iterated directly (``async for``) and offers
``map_histories()``; ``client.list_schedules()`` is awaited first in Temporal's samples
(``async for s in await client.list_schedules()``), so that iterator is also awaitable,
to itself, and ported code written either way runs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Generator
from typing import Any, Generic, TypeVar

T = TypeVar("T")
U = TypeVar("U")


class PagedAsyncIterator(Generic[T]):
    """Async iteration over pages a generator yields, stopping after ``limit`` items."""

    def __init__(self, pages: AsyncIterator[T], *, limit: int | None = None) -> None:
        self._items = pages
        self._left = limit

    def __aiter__(self) -> PagedAsyncIterator[T]:
        return self

    async def __anext__(self) -> T:
        if self._left is not None:
            if self._left <= 0:
                raise StopAsyncIteration
            self._left -= 1
        return await self._items.__anext__()

    def __await__(self) -> Generator[Any, None, PagedAsyncIterator[T]]:
        """Awaiting gives the iterator itself (``async for s in await client.list_schedules()``)."""
        if False:  # pragma: no cover - makes this a generator without suspending
            yield None
        return self


class WorkflowExecutionAsyncIterator(PagedAsyncIterator[T]):
    """What ``list_workflows`` returns; ``map_histories()`` fetches each listed run's history."""

    def __init__(
        self,
        pages: AsyncIterator[T],
        fetch_history: Callable[[T], Awaitable[Any]],
        *,
        limit: int | None = None,
    ) -> None:
        super().__init__(pages, limit=limit)
        self._fetch_history = fetch_history

    async def map_histories(self) -> AsyncIterator[Any]:
        """The ``WorkflowHistory`` of each listed execution, in list order."""
        async for execution in self:
            yield await self._fetch_history(execution)
