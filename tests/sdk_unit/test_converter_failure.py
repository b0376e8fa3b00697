"""Payload and failure conversion round-trips (no server needed)."""

from __future__ import annotations

import gc
import weakref
from dataclasses import dataclass
from datetime import UTC, datetime

from sdk._failure import exception_to_failure, failure_to_exception
from sdk.common import RetryPolicy
from sdk.converter import DataConverter, parameter_hints, return_hint
from sdk.exceptions import ActivityError, ApplicationError, RetryState


@dataclass
class Line:
    sku: str
    quantity: int


@dataclass
class Order:
    order_id: str
    lines: list[Line]
    placed_at: datetime


def test_dataclass_round_trips_through_type_hint() -> None:
    converter = DataConverter()
    order = Order("o-1", [Line("a", 2)], datetime(2026, 1, 1, tzinfo=UTC))
    payload = converter.to_payload(order)
    assert payload["metadata"] == {"encoding": "json/plain"}
    assert payload["data"]["lines"] == [{"sku": "a", "quantity": 2}]
    assert converter.from_payload(payload, Order) == order


def test_parameter_hints_restore_arguments() -> None:
    def place(order: Order, note: str | None) -> None: ...

    converter = DataConverter()
    payloads = converter.to_payloads([Order("x", [], datetime(2026, 1, 1, tzinfo=UTC)), None])
    decoded = converter.from_payloads(payloads, parameter_hints(place))
    assert isinstance(decoded[0], Order) and decoded[1] is None


class Placer:
    def place(self, order: Order, note: str | None = None) -> Line: ...

    async def run(self, order: Order) -> int: ...


def test_hints_of_a_method_are_the_same_bound_or_not_and_keep_no_instance_alive() -> None:
    placer = Placer()
    assert parameter_hints(placer.place) == [Order, str | None]
    assert parameter_hints(Placer.place, skip_self=True) == [Order, str | None]
    assert parameter_hints(Placer().run) == [Order] and return_hint(Placer().run) is int
    assert return_hint(placer.place) is Line
    gone = weakref.ref(placer)
    del placer
    gc.collect()
    assert gone() is None, "the hints' cache holds the instance a bound method was asked for"


def test_an_unhashable_callable_is_answered_without_the_cache() -> None:
    """A callable object's hints are looked up on the object (it has none of its own), as
    they always were; the cache must not refuse it for being unhashable."""

    class Unhashable:
        __hash__ = None  # type: ignore[assignment]

        def __call__(self, order: Order) -> str: ...

    assert parameter_hints(Unhashable()) == [None]
    assert return_hint(Unhashable()) is None


def test_application_error_round_trips_with_cause() -> None:
    try:
        try:
            raise ValueError("inner")
        except ValueError as inner:
            raise ApplicationError("outer", {"k": 1}, type="Bad", non_retryable=True) from inner
    except ApplicationError as exc:
        failure = exception_to_failure(exc)
    assert failure["application_failure_info"]["type"] == "Bad"
    assert failure["application_failure_info"]["non_retryable"] is True
    assert "raise ApplicationError" in failure["stack_trace"]
    assert failure["cause"]["application_failure_info"]["type"] == "ValueError"
    decoded = failure_to_exception(failure)
    assert isinstance(decoded, ApplicationError)
    assert decoded.details == ({"k": 1},) and decoded.non_retryable
    assert isinstance(decoded.__cause__, ApplicationError) and decoded.__cause__.message == "inner"


def test_activity_failure_decodes_with_cause() -> None:
    failure = {
        "message": "activity failed",
        "activity_failure_info": {
            "activity_type": "charge",
            "activity_id": "1",
            "scheduled_event_id": 5,
            "started_event_id": 6,
            "retry_state": "RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED",
        },
        "cause": {"message": "card declined", "application_failure_info": {"type": "Declined"}},
    }
    exc = failure_to_exception(failure)
    assert isinstance(exc, ActivityError)
    assert exc.activity_type == "charge" and exc.retry_state is RetryState.MAXIMUM_ATTEMPTS_REACHED
    assert isinstance(exc.__cause__, ApplicationError) and exc.__cause__.type == "Declined"


def test_retry_policy_wire_round_trip() -> None:
    policy = RetryPolicy(maximum_attempts=3, non_retryable_error_types=["Bad"])
    wire = policy.to_wire()
    assert wire["initial_interval"] == 1.0 and wire["maximum_attempts"] == 3
    assert RetryPolicy.from_wire(wire) == policy
