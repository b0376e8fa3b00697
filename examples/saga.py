"""A saga: book a trip's flight, hotel and car; when a step fails for good, undo the steps
that succeeded, newest first, and fail the trip with the reason.

Each booking adds its compensation to a list only once it succeeded, so a failure undoes
exactly what was done; the compensations are activities too, retried until they succeed.
Written as a Temporal program is, with only the imports changed. Run it against
``make run``: ``python -m examples.saga``.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

from sdk import activity, workflow
from sdk.client import Client, WorkflowFailureError
from sdk.common import RetryPolicy
from sdk.envconfig import ClientConfig
from sdk.exceptions import ActivityError, ApplicationError
from sdk.worker import Worker

STEP = timedelta(seconds=10)
# No inventory comes back by retrying: a refusal is final.
ONCE = RetryPolicy(maximum_attempts=1)


@activity.defn
async def book_flight(trip: str) -> str:
    return f"flight-{trip}"


@activity.defn
async def book_hotel(trip: str) -> str:
    return f"hotel-{trip}"


@activity.defn
async def book_car(trip: str) -> str:
    raise ApplicationError(f"no car free for {trip}", type="SoldOut", non_retryable=True)


@activity.defn
async def cancel_booking(booking: str) -> str:
    return f"cancelled {booking}"


@workflow.defn
class BookTrip:
    @workflow.run
    async def run(self, trip: str) -> list[str]:
        compensations: list[str] = []  # bookings to cancel, in the order they were made
        try:
            for step in (book_flight, book_hotel, book_car):
                booking: str = await workflow.execute_activity(
                    step, trip, start_to_close_timeout=STEP, retry_policy=ONCE
                )
                compensations.append(booking)
        except ActivityError as failure:
            undone = [
                await workflow.execute_activity(cancel_booking, booking, start_to_close_timeout=STEP)
                for booking in reversed(compensations)
            ]
            workflow.logger.info("trip %s undone: %s", trip, undone)
            reason = getattr(failure.cause, "message", str(failure.cause))
            raise ApplicationError(f"trip not booked ({reason}); undone: {', '.join(undone)}") from failure
        return compensations


async def main() -> None:
    config = ClientConfig.load_client_connect_config()
    config.setdefault("target_host", "localhost:7243")
    client = await Client.connect(**config)
    task_queue = f"trips-{uuid.uuid4().hex[:8]}"
    activities = [book_flight, book_hotel, book_car, cancel_booking]
    async with Worker(client, task_queue=task_queue, workflows=[BookTrip], activities=activities):
        try:
            await client.execute_workflow(
                BookTrip.run, "t-42", id=f"trip-{uuid.uuid4().hex[:8]}", task_queue=task_queue
            )
        except WorkflowFailureError as failed:
            print(f"Workflow failed: {getattr(failed.cause, 'message', failed.cause)}")
    await client.close()


if __name__ == "__main__":
    asyncio.run(main())
