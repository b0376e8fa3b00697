"""``chronicle``: the command line for a Chronicle server, over its REST API.

The tool is part of the SDK (it runs wherever a worker runs, and reaches the server the
way the SDK's client does: ``sdk.envconfig`` for the connection, ``sdk._http`` for every
call). Its command groups are listed in :mod:`sdk.cli.registry`; ``python -m sdk.cli``
and the installed ``chronicle`` script both start :func:`sdk.cli.main.main`.

Start-up stays fast because nothing heavy is imported until a command runs: the group
modules import only click at module level, and rich (tables) and httpx (the SDK's client)
are imported inside the functions that need them.
"""
