"""How an event goes on the wire: one shape for the API's answers and the close notification.

A waiting ``result()`` may get the close event from the notification instead of a read
(:func:`history.kernel.wakeups.close_wakeup_payload`); both paths build it here, so the
answer is the same whichever way the event came.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any


def event_dict(event_id: int, event_type: str, event_time: datetime, attributes: Any) -> dict[str, Any]:
    """An event as the API sends it."""
    return {
        "event_id": event_id,
        "event_type": event_type,
        "event_time": event_time.isoformat(),
        "attributes": attributes,
    }
