"""The provisioning API's request and answer bodies, validated by DRF and described to
OpenAPI from the same classes. A namespace's settings take their types and bounds from
the model's fields, as the settings pages' forms do."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from chronicle.api import StrictCharField
from chronicle.strict_fields import StrictFloatField
from executions.provisioning import SETTINGS
from namespaces.models import MemberRole, Namespace, Role

REASON_HELP = "why, for the audit log"


def _reason() -> StrictCharField:
    return StrictCharField(
        required=False, default="", allow_blank=True, max_length=2000, help_text=REASON_HELP
    )


class NamespaceSettingsSerializer(serializers.ModelSerializer[Namespace]):
    """Settings to change (any subset); the others keep their values."""

    reason = _reason()

    class Meta:
        model = Namespace
        fields: tuple[str, ...] = (*SETTINGS, "reason")
        extra_kwargs = {name: {"required": False} for name in SETTINGS}

    def settings(self) -> dict[str, Any]:
        return {name: value for name, value in self.validated_data.items() if name in SETTINGS}


class NamespaceCreateSerializer(NamespaceSettingsSerializer):
    """A new namespace: its name and any settings that differ from the defaults."""

    name = StrictCharField(max_length=255, help_text="letters, digits, '.', '_' or '-'")

    class Meta(NamespaceSettingsSerializer.Meta):
        fields = ("name", *SETTINGS, "reason")


class NamespaceSummarySerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    id = serializers.UUIDField()
    description = serializers.CharField()
    created_at = serializers.DateTimeField()


class NamespaceListSerializer(serializers.Serializer[Any]):
    namespaces = NamespaceSummarySerializer(many=True)


class QueueLimitSerializer(serializers.Serializer[Any]):
    task_queue = serializers.CharField()
    dispatch_rps = serializers.FloatField()


class NamespaceSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    id = serializers.UUIDField()
    created_at = serializers.DateTimeField()
    settings = serializers.DictField(help_text="every setting the update takes, with its value")
    active_api_keys = serializers.IntegerField()
    members = serializers.IntegerField()
    task_queue_limits = QueueLimitSerializer(many=True)


class ChangesSerializer(serializers.Serializer[Any]):
    changed = serializers.DictField(help_text="each changed item's old and new value")


class NamespaceUpdatedSerializer(ChangesSerializer):
    namespace = NamespaceSerializer()


class NamespaceDeleteSerializer(serializers.Serializer[Any]):
    confirm = StrictCharField(help_text="the namespace's name again: deleting removes all it holds")
    reason = _reason()


class NamespaceDeletedSerializer(serializers.Serializer[Any]):
    deleted = serializers.CharField()
    removed = serializers.DictField(child=serializers.IntegerField(), help_text="rows removed per model")


class ApiKeyCreateSerializer(serializers.Serializer[Any]):
    name = StrictCharField(max_length=200)
    roles = serializers.ListField(child=serializers.ChoiceField(Role.values), allow_empty=False)
    expires_at = serializers.DateTimeField(required=False, default=None, allow_null=True)
    reason = _reason()


class ApiKeySerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    name = serializers.CharField()
    prefix = serializers.CharField()
    roles = serializers.ListField(child=serializers.CharField())
    state = serializers.ChoiceField(["active", "revoked", "expired"])
    created_at = serializers.DateTimeField()
    last_used_at = serializers.DateTimeField(allow_null=True)
    revoked_at = serializers.DateTimeField(allow_null=True)
    expires_at = serializers.DateTimeField(allow_null=True)


class ApiKeyListSerializer(serializers.Serializer[Any]):
    api_keys = ApiKeySerializer(many=True)


class IssuedApiKeySerializer(serializers.Serializer[Any]):
    key = ApiKeySerializer()
    api_key = serializers.CharField(help_text="the key itself: shown in this answer only")


class ReasonSerializer(serializers.Serializer[Any]):
    reason = _reason()


class ApiKeyRotateSerializer(ReasonSerializer):
    grace_seconds = serializers.IntegerField(
        required=False,
        default=86_400,
        min_value=0,
        max_value=365 * 86_400,
        help_text="how long the old key keeps working (default a day)",
    )


class RotatedApiKeySerializer(IssuedApiKeySerializer):
    old_key = ApiKeySerializer()


class MemberSerializer(serializers.Serializer[Any]):
    username = serializers.CharField()
    role = serializers.ChoiceField(MemberRole.values)


class MemberListSerializer(serializers.Serializer[Any]):
    members = MemberSerializer(many=True)


class MemberGrantSerializer(ReasonSerializer):
    username = StrictCharField(max_length=150)
    role = serializers.ChoiceField(MemberRole.values)
    new_user = serializers.BooleanField(
        required=False,
        default=False,
        help_text="create the account (it must not exist) with a one-time password, shown once",
    )
    email = serializers.EmailField(required=False, default="", allow_blank=True)


class MemberGrantedSerializer(ChangesSerializer):
    member = MemberSerializer()
    one_time_password = serializers.CharField(
        required=False, help_text="with new_user only: the new account's password, shown once"
    )


class QueueLimitSetSerializer(ReasonSerializer):
    # A finite bound: DRF's FloatField takes "inf", which no limit can mean.
    dispatch_rps = StrictFloatField(
        min_value=0, max_value=1_000_000, allow_null=True, help_text="0 or null: no limit"
    )


class QueueLimitListSerializer(serializers.Serializer[Any]):
    task_queue_limits = QueueLimitSerializer(many=True)
