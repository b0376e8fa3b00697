"""Error pages (403, 404, 500) in the UI's own layout, with the way back.

A person who follows a stale link or lacks a role should land on a page that says what
happened in words and offers the namespaces they can open, not on a bare server page.
A 404 says the same for "does not exist" and "not yours" (the UI never tells an outsider
what exists); the namespace's section links show only to its members.
"""

from __future__ import annotations

import logging

from django.http import HttpRequest, HttpResponse, HttpResponseServerError
from django.shortcuts import render
from django.utils.http import url_has_allowed_host_and_scheme

from executions.ui.access import Access, member_access

log = logging.getLogger(__name__)

TITLES = {
    400: "This was refused",
    403: "You cannot do this here",
    404: "Nothing here",
    500: "Something went wrong on our side",
}
EXPLANATIONS = {
    400: "Nothing was changed. Go back, correct the form and send it again.",
    403: "Your role in this namespace does not allow it. An admin of the namespace can change your role.",
    404: "There is no such page, or it is in a namespace you are not a member of.",
    500: "The server failed to answer. Try again; if it keeps failing, the server's log says why.",
}


def _access(request: HttpRequest) -> Access | None:
    """The user's membership in the namespace the URL names, if any (for the section links)."""
    match = request.resolver_match
    namespace = match.kwargs.get("namespace") if match else None
    if not namespace or not request.user.is_authenticated:
        return None
    return member_access(request.user.pk, str(namespace))


def _page(request: HttpRequest, status: int, exception: Exception | None) -> HttpResponse:
    detail = exception.args[0] if exception is not None and exception.args else ""
    context = {
        "status": status,
        "title": TITLES[status],
        "explanation": EXPLANATIONS[status],
        # Our own views raise with a sentence; the resolver's 404 carries a dict of patterns.
        "detail": detail if isinstance(detail, str) else "",
        # No namespace switcher: the page must not list namespace names beside an id that
        # may belong to one of them.
        "access": _access(request),
    }
    return render(request, "ui/error.html", context, status=status)


def refused(request: HttpRequest, message: str, status: int) -> HttpResponse:
    """A form a page posts without drawing it again (save a view, stop a batch) was refused:
    say why, in the layout, with the way back (the status stays the error's own)."""
    context = {
        "status": status,
        "title": TITLES[400],
        "explanation": EXPLANATIONS[400],
        "detail": message,
        "access": _access(request),
        "back": _same_site(request, request.headers.get("Referer", "")),
    }
    return render(request, "ui/error.html", context, status=status)


def _same_site(request: HttpRequest, url: str) -> str:
    """``url`` when it points back into this site (a link never leads elsewhere), else ""."""
    return url if url_has_allowed_host_and_scheme(url, {request.get_host()}) else ""


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    return _page(request, 404, exception)


def forbidden(request: HttpRequest, exception: Exception) -> HttpResponse:
    return _page(request, 403, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    """The 500 page reads nothing from the database, which may be what failed."""
    try:
        context = {"status": 500, "title": TITLES[500], "explanation": EXPLANATIONS[500]}
        return render(request, "ui/error.html", context, status=500)
    except Exception:  # the layout itself failed: answer in plain text rather than not at all
        log.exception("the error page could not be rendered")
        return HttpResponseServerError("Server error", content_type="text/plain")
