"""The LISTEN hub's fan-out: a task wakes as many polls as it announces; history wakes all."""

from __future__ import annotations

import asyncio

from history.kernel.wakeups import parse_task_wakeup, task_wakeup_key, task_wakeup_payload
from matching.longpoll import WakeupHub


async def _park(hub: WakeupHub, key: str, n: int) -> list[asyncio.Task[bool]]:
    """``n`` waiters on ``key``, registered in order."""
    waiters = []
    for _ in range(n):
        waiters.append(asyncio.create_task(hub.wait(key, timeout=5)))
        await asyncio.sleep(0)
    return waiters


def test_a_counted_wake_up_wakes_that_many_polls_longest_waiting_first() -> None:
    async def story() -> None:
        hub = WakeupHub()
        waiters = await _park(hub, "q", 5)
        hub.wake("q", 2)
        await asyncio.sleep(0.01)
        assert [w.done() for w in waiters] == [True, True, False, False, False]
        # The woken ones left the registry: the next task goes to the next in line.
        hub.wake("q", 1)
        await asyncio.sleep(0.01)
        assert [w.done() for w in waiters] == [True, True, True, False, False]
        hub.wake("q")  # uncounted: everyone
        assert all(await asyncio.gather(*waiters))

    asyncio.run(story())


def test_more_tasks_than_waiters_wakes_every_waiter_and_a_timed_out_one_leaves_no_trace() -> None:
    async def story() -> None:
        hub = WakeupHub()
        assert await hub.wait("idle", timeout=0.01) is False
        waiters = await _park(hub, "q", 2)
        hub.wake("q", 10)
        assert await asyncio.gather(*waiters) == [True, True]
        hub.wake("q", 1)  # nobody waits: nothing happens, nothing is kept
        assert hub._waiters == {}

    asyncio.run(story())


def test_the_payload_carries_the_count_after_a_queue_name_with_bars() -> None:
    key = task_wakeup_key("ns-1", "activity", "orders|eu", "")
    assert parse_task_wakeup(task_wakeup_payload(key, 7)) == (key, 7)


def test_a_task_of_one_build_wakes_no_poll_of_another_build() -> None:
    """Pollers of two builds share a queue; each build's tasks wake its own pollers."""
    assert task_wakeup_key("ns", "workflow", "q", "v1") != task_wakeup_key("ns", "workflow", "q", "v2")
    assert task_wakeup_key("ns", "workflow", "q", "") != task_wakeup_key("ns", "workflow", "q", "v1")
    # A bar in a build id cannot make one (build, queue) pair read as another.
    assert task_wakeup_key("ns", "workflow", "b|q", "a") != task_wakeup_key("ns", "workflow", "q", "a|b")


def test_a_notification_sent_while_the_waiter_looks_is_not_missed() -> None:
    """The waiter subscribes before its own look, so a wake-up that lands during the look
    ends the wait at once instead of after the (here 5 s) timeout."""

    async def story() -> None:
        hub = WakeupHub()

        async def look_while_a_task_arrives() -> bool:
            hub.wake("q", 1)  # the notification lands between the look and the wait
            return False

        began = asyncio.get_running_loop().time()
        assert await hub.wait("q", timeout=5, ready=look_while_a_task_arrives) is True
        assert asyncio.get_running_loop().time() - began < 1
        assert hub._waiters == {}

    asyncio.run(story())


def test_a_look_that_finds_the_work_returns_without_waiting() -> None:
    async def story() -> None:
        hub = WakeupHub()

        async def found() -> bool:
            return True

        began = asyncio.get_running_loop().time()
        assert await hub.wait("q", timeout=5, ready=found) is True
        assert asyncio.get_running_loop().time() - began < 1
        assert hub._waiters == {}

    asyncio.run(story())


def test_a_close_carries_itself_when_it_fits_and_only_its_key_when_not() -> None:
    from history.kernel.wakeups import close_wakeup_key, close_wakeup_payload, parse_history_wakeup

    small = close_wakeup_payload("r1", {"status": "Completed", "event": {"event_id": 5}})
    assert parse_history_wakeup(small) == (
        close_wakeup_key("r1"),
        '{"status":"Completed","event":{"event_id":5}}',
    )
    big = close_wakeup_payload("r1", {"status": "Completed", "blob": "x" * 8_000})
    assert parse_history_wakeup(big) == (close_wakeup_key("r1"), "")
    assert parse_history_wakeup("run-9") == ("run-9", "")


def test_a_waiter_receives_what_its_notification_carried() -> None:
    async def story() -> None:
        hub = WakeupHub()
        got: list[str] = []
        waiter = asyncio.create_task(hub.wait("close:r", timeout=5, detail=got.append))
        await asyncio.sleep(0)
        hub.wake("close:r", detail='{"status":"Failed"}')
        assert await waiter is True
        assert got == ['{"status":"Failed"}']

    asyncio.run(story())
