"""The ``temporal.api.enums`` types: see ``sdk.api.enums.v1``."""
