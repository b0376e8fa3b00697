"""Opaque, signed task tokens: the worker cannot forge or alter them."""

from __future__ import annotations

from typing import Any

from django.core import signing

from chronicle.errors import ChronicleError, ErrorCode

_SALT = "chronicle.task-token.v1"


def encode(payload: dict[str, Any]) -> str:
    return signing.dumps(payload, salt=_SALT, compress=True)


def decode(token: str, kind: str) -> dict[str, Any]:
    try:
        payload: dict[str, Any] = signing.loads(token, salt=_SALT)
    except (signing.BadSignature, ValueError, TypeError):
        raise ChronicleError(ErrorCode.INVALID_ARGUMENT, "task token is not valid") from None
    if payload.get("k") != kind:
        raise ChronicleError(ErrorCode.INVALID_ARGUMENT, f"not a {kind} task token")
    return payload
