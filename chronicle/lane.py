"""The lean lane's core: hot API calls answered in front of Django, shared by the apps.

The hot calls of a workflow (a client's start, signal and result wait; a worker's task
completions) each paid, through DRF, for its request wrapper, content negotiation,
serializer validation and renderer, and through Django for URL resolution and request
and response objects it did not use. A lane call is instead: the body read once, the
key and the tenancy gate, the body decoded and validated once by its struct
(:func:`decode_body`), the kernel call, and the answer encoded once (:func:`encode`).
Each app keeps its lane beside its API (``matching.lane``, ``executions.lane``); this
module holds what they share, and imports no app, so the apps depend on it and never on
each other through it.

What a caller sees is what the DRF views did: the ``{code, message, details}`` errors
with Retry-After, DRF's field errors (:mod:`chronicle.lane_errors`) and 405 message, and
the strict checks of :func:`chronicle.api.parse_json_body`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, TypeVar

import msgspec
from django.conf import settings

from chronicle.api import MAX_JSON_DEPTH, MAX_SECONDS, parse_json_body, refuse_nul
from chronicle.errors import ChronicleError, ErrorCode, invalid_fields
from chronicle.lane_errors import field_errors

UNSET: Any = msgspec.UNSET
EMPTY = b"{}"
Seconds = Annotated[float, msgspec.Meta(ge=0, le=MAX_SECONDS)]


@dataclass(frozen=True)
class Call:
    """One request to the lane, as the ASGI handler read it."""

    method: str
    authorization: str | None
    params: dict[str, str]  # the path's named segments
    query: bytes
    body: bytes

    def refuse_nul_in_path(self) -> None:
        """Path segments never pass the JSON parser: refused before they reach a query."""
        for value in self.params.values():
            refuse_nul(value, "the path")


@dataclass(frozen=True)
class Reply:
    """A whole answer: status, JSON body and any extra headers."""

    status: int
    body: bytes
    headers: tuple[tuple[bytes, bytes], ...] = ()


class MethodNotAllowed(ChronicleError):
    """A verb the endpoint does not take: 405 with DRF's code and message, and the verbs it
    does take in ``Allow`` (HTTP requires it on a 405)."""

    def __init__(self, method: str, allowed: tuple[str, ...] = ()) -> None:
        super().__init__(ErrorCode.INVALID_ARGUMENT, f'Method "{method}" not allowed.')
        self.allowed = allowed

    @property
    def status(self) -> int:
        return 405

    def as_dict(self) -> dict[str, Any]:
        return {"code": "method_not_allowed", "message": self.message}


def require_method(call: Call, *methods: str) -> None:
    if call.method not in methods:
        raise MethodNotAllowed(call.method, methods)


def error_reply(error: ChronicleError) -> Reply:
    """The error body and status, with Retry-After when the caller should wait (and Allow
    on a 405)."""
    headers: tuple[tuple[bytes, bytes], ...] = ()
    if error.retry_after is not None:
        headers += ((b"retry-after", str(max(1, int(error.retry_after + 0.999))).encode()),)
    if isinstance(error, MethodNotAllowed) and error.allowed:
        headers += ((b"allow", ", ".join(error.allowed).encode()),)
    return Reply(error.status, encode(error.as_dict()), headers)


_encoder = msgspec.json.Encoder()


def encode(value: Any) -> bytes:
    """JSON as DRF's renderer wrote it (compact, UTF-8)."""
    try:
        return _encoder.encode(value)
    except (TypeError, OverflowError):  # an integer msgspec cannot hold: the stdlib can
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


class Body(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Base of every lane body: strings are trimmed and JSON fields refuse an explicit null,
    as the DRF fields did (``CharField`` trims; ``JSONField`` refuses null); a field the body
    does not have is refused (:data:`chronicle.errors.UNKNOWN_FIELD`), as by the DRF views,
    and the schema says so (``additionalProperties: false``).

    ``json_fields`` name the fields of any JSON; ``blank_allowed`` the text fields that
    may be empty once trimmed (DRF's ``allow_blank=True``); the field errors read both.
    """

    json_fields: ClassVar[frozenset[str]] = frozenset()
    blank_allowed: ClassVar[frozenset[str]] = frozenset()

    def __post_init__(self) -> None:
        for name in self.__struct_fields__:
            value = getattr(self, name)
            if isinstance(value, str):
                trimmed = value.strip()
                if trimmed != value:
                    if not trimmed and name not in self.blank_allowed:
                        raise ValueError("This field may not be blank.")
                    setattr(self, name, trimmed)
            elif value is None and name in self.json_fields:
                raise ValueError("This field may not be null.")
            elif value is UNSET:
                setattr(self, name, None)

    def fields(self) -> dict[str, Any]:
        """The fields by name (the kernel's keyword arguments, for most bodies)."""
        return {name: getattr(self, name) for name in self.__struct_fields__}


B = TypeVar("B", bound=msgspec.Struct)
_DECODERS: dict[type[Any], msgspec.json.Decoder[Any]] = {}


def decode_body(raw: bytes, struct: type[B]) -> B:
    """Decode and validate a request body into ``struct``, or raise the 4xx it earns.

    A body can only hold a NUL as the escape ``\\u0000`` and can only nest past
    :data:`chronicle.api.MAX_JSON_DEPTH` with that many brackets, so the strict parser's
    full walk runs only for bodies that show one of those (or fail to decode); the others
    are decoded straight into their struct.

    A JSON value is taken only as the type its field declares (msgspec's strict mode): the
    schema is generated from the struct, so ``0`` for a boolean or ``"5"`` for a number,
    which the schema calls invalid, is refused rather than read as ``false`` or ``5``.
    """
    if len(raw) > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
        raise ChronicleError(ErrorCode.PAYLOAD_TOO_LARGE, "request body too large")
    if raw and not _may_need_the_walk(raw):
        decoder = _DECODERS.get(struct)
        if decoder is None:
            decoder = _DECODERS[struct] = msgspec.json.Decoder(struct)
        try:
            return decoder.decode(raw)  # type: ignore[no-any-return]
        except msgspec.DecodeError:
            pass  # malformed or invalid: the checked path below names the fault
    return convert(parse_json_body(raw), struct, strict=True)


def convert(value: dict[str, Any], struct: type[B], *, strict: bool = False) -> B:
    """``value`` (vetted JSON, or query parameters) as ``struct``, or the 400 with every
    faulty field in DRF's words. A query string holds only text, so it is read laxly
    (``"5"`` is a number there); a JSON body is ``strict``, each value of its field's type."""
    try:
        return msgspec.convert(value, struct, strict=strict)
    except msgspec.ValidationError:
        raise invalid_fields(field_errors(struct, value, strict=strict)) from None


def _may_need_the_walk(raw: bytes) -> bool:
    """Whether ``raw`` could hold a NUL or nest deeper than the limit (false positives are
    fine: they only take the checked path)."""
    return b"\\u0000" in raw or raw.count(b"[") + raw.count(b"{") > MAX_JSON_DEPTH
