"""The ``temporal.api.failure`` messages: see ``sdk.api.failure.v1``."""
