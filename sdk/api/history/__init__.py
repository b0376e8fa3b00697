"""The ``temporal.api.history`` messages: see ``sdk.api.history.v1``."""
