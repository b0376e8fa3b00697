"""Every example workflow and activity, for the workers that host them all."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from examples import approval, fan_out, order_fulfilment

WORKFLOWS: list[type] = [order_fulfilment.OrderFulfilment, approval.Approval, fan_out.FanOut]
ACTIVITIES: list[Callable[..., Any]] = [
    order_fulfilment.charge_card,
    order_fulfilment.refund,
    order_fulfilment.ship,
    fan_out.square,
]
