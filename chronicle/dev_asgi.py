"""The frontend's ASGI application under ``manage.py start_dev``: the production one, plus
what a development machine lacks.

* Static files (the admin's CSS and JavaScript) are served from the apps' own folders by
  Django's static-files handler, with DEBUG on or off. In production a web server serves
  ``collectstatic``'s output; a development stack has no such server, and without this
  ``/admin/`` renders as bare HTML.
* The access log leaves out the long-polls. An idle demo worker keeps ten polls open, each
  answered at least once a minute, and their lines buried everything a developer looks for
  (the credentials banner, the UI's requests, errors). Every other request is still logged.
"""

from __future__ import annotations

import logging

from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

from chronicle.asgi import application as production_application

# Paths whose request waits for work or for news: a worker's task polls, a history long-poll.
LONG_POLL_MARKERS = ("/workflow-tasks/poll", "/activity-tasks/poll", "wait_new_event=true")


class QuietLongPolls(logging.Filter):
    """Drops uvicorn's access-log records of long-polls (see the module's docstring)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        # uvicorn logs: '%s - "%s %s HTTP/%s" %d' % (client, method, path?query, version, status)
        if isinstance(args, tuple) and len(args) >= 3:
            path = str(args[2])
            return not any(marker in path for marker in LONG_POLL_MARKERS)
        return True


logging.getLogger("uvicorn.access").addFilter(QuietLongPolls())

application = ASGIStaticFilesHandler(production_application)
