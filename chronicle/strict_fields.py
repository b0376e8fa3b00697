"""Serializer fields that take a JSON value only of the type the schema states.

DRF's ``FloatField`` reads ``float(data)``, so JSON's ``true`` and ``false`` became 1.0
and 0.0, and a request the schema calls invalid (``"dispatch_rps": false``) was applied.
The fields here refuse what their schema type does not cover, as
``chronicle.api.StrictCharField`` does for text.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers


class StrictFloatField(serializers.FloatField):
    """A FloatField that refuses booleans instead of reading them as 1.0 and 0.0."""

    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool):
            self.fail("invalid")
        return float(super().to_internal_value(data))
