"""The ``temporal.api.common`` messages: see ``sdk.api.common.v1``."""
