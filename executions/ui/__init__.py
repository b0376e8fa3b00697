"""The operator UI: server-rendered pages over the visibility queries, the selectors and
the kernel.

Every page is scoped to one namespace the signed-in user is a member of; anything else
is a 404, so the UI never reveals which namespaces or workflows exist elsewhere. Reads
need any role; acting on executions and schedules needs ``operator`` or ``admin``;
managing the namespace needs ``admin``. Every action is recorded in the audit log
(``executions.audit``). ``access`` holds the checks every page shares; each other module
owns one area of pages.
"""
