"""Transfer protocol serializers: strict inputs (unknown keys refused), bounded outputs."""

from __future__ import annotations

import json
from typing import Any

from rest_framework import serializers

from knowledge.api.serializers import ContentField, TextField
from knowledge.models import DocumentKind, DocumentStatus
from transfer import format as fmt
from transfer import services
from workspaces.models import SLUG_PATTERN

MAX_PROVENANCE_BYTES = 1024 * 1024
SHA256_PATTERN = r"^[0-9a-f]{64}$"
KEY_PATTERN = r"^d[0-9]{6}$"


class StrictSerializer(serializers.Serializer):
    """Refuses keys it does not know: a client speaking another protocol version fails loudly."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = set(data) - set(self.fields)
            if unknown:
                raise serializers.ValidationError({"non_field_errors": ["Unknown field."]}, code="unknown_field")
        return super().to_internal_value(data)


class JsonObjectField(serializers.JSONField):
    """A JSON object (or null when allowed): bounded size and depth, no NUL characters."""

    def __init__(self, *, max_bytes: int = MAX_PROVENANCE_BYTES, **kwargs: Any) -> None:
        self.max_bytes = max_bytes
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> Any:
        value = super().to_internal_value(data)
        if value is None:
            return None
        if not isinstance(value, dict):
            raise serializers.ValidationError("Expected a JSON object.", code="not_an_object")
        try:
            encoded = json.dumps(value, ensure_ascii=False).encode("utf-8")
        except (TypeError, ValueError, UnicodeEncodeError) as exc:
            raise serializers.ValidationError("Invalid JSON object.", code="invalid") from exc
        if b"\\u0000" in encoded:
            raise serializers.ValidationError("NUL characters are not allowed.", code="invalid")
        if len(encoded) > self.max_bytes:
            raise serializers.ValidationError("The object is too large.", code="max_length")
        if fmt.json_depth(value) > fmt.MAX_YAML_DEPTH:
            raise serializers.ValidationError("The object is nested too deeply.", code="max_depth")
        return value


def page_limit() -> serializers.IntegerField:
    return serializers.IntegerField(min_value=1, max_value=services.MAX_INVENTORY_PAGE, default=services.INVENTORY_PAGE)


def slug_field(**kwargs: Any) -> serializers.RegexField:
    return serializers.RegexField(SLUG_PATTERN, max_length=100, **kwargs)


# --- export --------------------------------------------------------------------------------


class InventoryQuerySerializer(StrictSerializer):
    namespace = slug_field(help_text="Source namespace slug.")
    cursor = serializers.UUIDField(required=False, help_text="`next_cursor` of the previous page.")
    limit = page_limit()


class BodyRefSerializer(StrictSerializer):
    document_id = serializers.UUIDField()
    version_id = serializers.UUIDField()


class BodiesRequestSerializer(StrictSerializer):
    namespace = slug_field()
    items = BodyRefSerializer(many=True, min_length=1, max_length=services.MAX_BATCH)


class TransferNamespaceSerializer(serializers.Serializer):
    slug = serializers.CharField()
    display_name = serializers.CharField()
    description = serializers.CharField(allow_null=True)
    kind = serializers.CharField()
    provenance = serializers.DictField()


class TransferImportedSerializer(serializers.Serializer):
    source_uuid = serializers.CharField()
    provenance = serializers.DictField(allow_null=True)
    sha256 = serializers.CharField()


class InventoryEntrySerializer(serializers.Serializer):
    document_id = serializers.UUIDField()
    version_id = serializers.UUIDField()
    version_number = serializers.IntegerField()
    path = serializers.CharField()
    title = serializers.CharField()
    icon = serializers.CharField(allow_null=True)
    kind = serializers.ChoiceField(choices=DocumentKind.values)
    status = serializers.ChoiceField(choices=DocumentStatus.values)
    sha256 = serializers.CharField(allow_null=True, help_text="Null for a legacy version without a stored hash.")
    bytes = serializers.IntegerField()
    frontmatter = serializers.DictField(allow_null=True)
    provenance = serializers.DictField()
    imported = TransferImportedSerializer(allow_null=True, help_text="Set when this document was itself imported.")


class InventorySerializer(serializers.Serializer):
    namespace = TransferNamespaceSerializer()
    entries = InventoryEntrySerializer(many=True)
    total = serializers.IntegerField()
    next_cursor = serializers.CharField(allow_null=True)


class BodySerializer(serializers.Serializer):
    document_id = serializers.UUIDField()
    version_id = serializers.UUIDField()
    status = serializers.CharField(help_text="ok, missing, checksum_mismatch, too_large or deferred (ask again).")
    sha256 = serializers.CharField(required=False)
    bytes = serializers.IntegerField(required=False)
    content = serializers.CharField(required=False)


class BodiesSerializer(serializers.Serializer):
    items = BodySerializer(many=True)


# --- import --------------------------------------------------------------------------------


class ReceiptsQuerySerializer(StrictSerializer):
    namespace = slug_field(help_text="Destination namespace slug.")
    bundle = serializers.RegexField(SHA256_PATTERN)
    cursor = serializers.RegexField(KEY_PATTERN, required=False)
    limit = page_limit()


class ImportNamespaceBriefSerializer(serializers.Serializer):
    slug = serializers.CharField()
    display_name = serializers.CharField()
    description = serializers.CharField(allow_null=True)
    documents = serializers.IntegerField()
    request_bytes = serializers.IntegerField()


class ReceiptSerializer(serializers.Serializer):
    key = serializers.CharField()
    document_id = serializers.UUIDField()
    digest = serializers.CharField()
    unchanged = serializers.BooleanField(help_text="False when the document was renamed, edited or archived.")
    reconciled = serializers.BooleanField()


class ReceiptsSerializer(serializers.Serializer):
    namespace = ImportNamespaceBriefSerializer(allow_null=True)
    receipts = ReceiptSerializer(many=True)
    total = serializers.IntegerField()
    next_cursor = serializers.CharField(allow_null=True)


class NamespaceImportRequestSerializer(StrictSerializer):
    bundle = serializers.RegexField(SHA256_PATTERN)
    slug = slug_field()
    display_name = TextField(max_length=200, allow_blank=True, default="")
    description = TextField(max_length=10_000, allow_blank=True, allow_null=True, default="")
    provenance = JsonObjectField(default=dict)
    documents = serializers.IntegerField(min_value=0, max_value=10**9)
    request_bytes = serializers.IntegerField(min_value=0, max_value=10**15)
    resume = serializers.BooleanField(default=False)

    def validate_description(self, value: str | None) -> str:
        return value or ""

    def validate_provenance(self, value: dict[str, Any] | None) -> dict[str, Any]:
        return value or {}


class NamespaceImportSerializer(serializers.Serializer):
    created = serializers.BooleanField()
    namespace = ImportNamespaceBriefSerializer()


class DocumentImportItemSerializer(StrictSerializer):
    key = serializers.RegexField(KEY_PATTERN)
    source_id = serializers.UUIDField()
    path = TextField(max_length=fmt.MAX_PATH_LENGTH)
    title = TextField(max_length=fmt.MAX_TITLE_LENGTH)
    icon = TextField(max_length=200, allow_blank=True, allow_null=True, required=False)
    kind = serializers.ChoiceField(choices=DocumentKind.values)
    status = serializers.ChoiceField(choices=DocumentStatus.values)
    frontmatter = JsonObjectField(allow_null=True, required=False)
    provenance = JsonObjectField(default=dict)
    sha256 = serializers.RegexField(SHA256_PATTERN)
    bytes = serializers.IntegerField(min_value=0, max_value=fmt.MAX_DOCUMENT_BYTES)
    content = ContentField(max_length=fmt.MAX_DOCUMENT_BYTES)

    def validate_source_id(self, value: Any) -> str:
        return str(value)

    def validate_path(self, value: str) -> str:
        if fmt.path_problem(value):
            raise serializers.ValidationError("Not a normalised document path.", code="invalid_path")
        return value

    def validate_title(self, value: str) -> str:
        if not value.strip() or "\x00" in value:
            raise serializers.ValidationError("A title is required.", code="blank")
        return value

    def validate_provenance(self, value: dict[str, Any] | None) -> dict[str, Any]:
        return value or {}


class DocumentImportRequestSerializer(StrictSerializer):
    bundle = serializers.RegexField(SHA256_PATTERN)
    namespace = slug_field()
    documents = DocumentImportItemSerializer(many=True, min_length=1, max_length=services.MAX_BATCH)

    def validate_documents(self, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        keys = [item["key"] for item in value]
        if len(set(keys)) != len(keys):
            raise serializers.ValidationError("Keys must be unique in one request.", code="duplicate")
        return value


class ItemResultSerializer(serializers.Serializer):
    key = serializers.CharField()
    status = serializers.CharField(help_text="created, skipped (already imported, unchanged) or error.")
    document_id = serializers.UUIDField(required=False)
    http_status = serializers.IntegerField(required=False, help_text="For errors: the status it would have had.")
    code = serializers.CharField(required=False)


class DocumentImportSerializer(serializers.Serializer):
    results = ItemResultSerializer(many=True)


class ReconcileRequestSerializer(StrictSerializer):
    bundle = serializers.RegexField(SHA256_PATTERN)
    namespace = slug_field()
    keys = serializers.ListField(child=serializers.RegexField(KEY_PATTERN), min_length=1, max_length=services.MAX_BATCH)


class ReconcileResultSerializer(serializers.Serializer):
    key = serializers.CharField()
    status = serializers.CharField(help_text="reconciled or error.")
    references = serializers.IntegerField(required=False)
    resolved = serializers.IntegerField(required=False)
    http_status = serializers.IntegerField(required=False)
    code = serializers.CharField(required=False)


class ReconcileSerializer(serializers.Serializer):
    results = ReconcileResultSerializer(many=True)
