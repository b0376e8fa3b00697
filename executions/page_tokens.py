"""Opaque page tokens, signed and bound to the namespace and the listing they were minted for.

Every paginated list hands its caller a token for the next page. The token carries the
last row's position, so it must only ever be read back by the list that minted it: the
signature's salt names the kind of list and the namespace's id, so a token of another
namespace (or of another list, or altered by hand) does not verify and is refused exactly
as a token nobody minted is. What a token says of the namespace it came from is never
part of that answer.
"""

from __future__ import annotations

from typing import Any

from django.core import signing

from namespaces.models import Namespace

_SALT = "chronicle.page-token.v1"


def _signer(kind: str, namespace: Namespace) -> signing.Signer:
    return signing.Signer(salt=f"{_SALT}:{kind}:{namespace.pk}")


def mint(kind: str, namespace: Namespace, position: Any) -> str:
    """A token for ``position`` (any JSON value) on a ``kind`` list of ``namespace``."""
    return _signer(kind, namespace).sign_object(position)


def read(kind: str, namespace: Namespace, token: str) -> Any | None:
    """The position a token of this namespace's ``kind`` list carries; None for any other
    string (unsigned, altered, another list's, another namespace's)."""
    try:
        return _signer(kind, namespace).unsign_object(token)
    except (signing.BadSignature, ValueError, TypeError, UnicodeError):
        return None
