"""Input serializers validate one write each; output serializers render models."""

from __future__ import annotations

import json
from datetime import datetime, tzinfo
from typing import Any
from urllib.parse import quote

from django.conf import settings
from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.validators import ProhibitSurrogateCharactersValidator

from knowledge.models import Document, DocumentKind, DocumentStatus, DocumentVersion, EditPolicy
from knowledge.selectors import ARCHIVE_FILTERS, DOCUMENT_ORDERINGS, ListedDocument
from workspaces.models import SLUG_PATTERN, NamespaceKind, OthersCan, Permission, Visibility

MAX_METADATA_BYTES = 64 * 1024


class TextField(serializers.CharField):
    """A strict CharField: strings only, and no text PostgreSQL cannot store (lone surrogates)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # The UTF-8 encode below finds lone surrogates in C; DRF's validator walks every
        # character in Python (about 0.3 s for a 10 MiB body).
        self.validators = [v for v in self.validators if not isinstance(v, ProhibitSurrogateCharactersValidator)]

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        value = super().to_internal_value(data)
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise serializers.ValidationError("Text must be valid Unicode (no lone surrogates).") from exc
        return value


def ContentField(**kwargs: Any) -> TextField:  # noqa: N802 - a field factory
    return TextField(trim_whitespace=False, allow_blank=True, **kwargs)


class MetadataField(serializers.DictField):
    """A JSON object of at most 64 KiB that both databases can store."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(child=serializers.JSONField(), **kwargs)

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        value = super().to_internal_value(data)
        try:
            encoded = json.dumps(value, ensure_ascii=False).encode("utf-8")
        except (TypeError, ValueError, UnicodeEncodeError) as exc:
            raise serializers.ValidationError("metadata must be a JSON object of valid Unicode text.") from exc
        if b"\\u0000" in encoded:
            raise serializers.ValidationError("metadata may not contain NUL characters.")
        if len(encoded) > MAX_METADATA_BYTES:
            raise serializers.ValidationError(f"metadata is limited to {MAX_METADATA_BYTES} bytes of JSON.")
        return value


class VersionRefField(serializers.CharField):
    """A version number or a version id (numbers arrive as integers or digit strings)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(max_length=64, required=False, allow_null=True, allow_blank=True, **kwargs)


def public_base_url(request: Any) -> str:
    if settings.KNOWLEDGE_PUBLIC_URL:
        return settings.KNOWLEDGE_PUBLIC_URL.rstrip("/")
    if request is not None:
        return request.build_absolute_uri("/").rstrip("/")
    return ""


def reader_url(request: Any, namespace_slug: str, path: str) -> str:
    return f"{public_base_url(request)}/ui/kb/{quote(namespace_slug)}/{quote(path)}"


# --- output --------------------------------------------------------------------------------


class NamespaceSerializer(serializers.Serializer):
    slug = serializers.CharField()
    display_name = serializers.CharField()
    description = serializers.CharField()
    kind = serializers.CharField()
    owner = serializers.CharField(source="owner.username")
    visibility_default = serializers.CharField()
    others_can = serializers.CharField()
    effective_permission = serializers.SerializerMethodField()
    metadata = serializers.DictField()
    archived = serializers.BooleanField()
    archived_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    @extend_schema_field(serializers.ChoiceField(choices=Permission.values))
    def get_effective_permission(self, namespace: Any) -> str:
        return self.context["permissions"][namespace.pk]


class AclEntrySerializer(serializers.Serializer):
    subject_type = serializers.ChoiceField(choices=["user", "group"])
    subject = TextField(max_length=150)
    permission = serializers.ChoiceField(choices=[Permission.READ, Permission.WRITE, Permission.OWN])


class AclSerializer(serializers.Serializer):
    others_can = serializers.ChoiceField(choices=OthersCan.values)
    entries = AclEntrySerializer(many=True)


class VersionSummarySerializer(serializers.Serializer):
    id = serializers.UUIDField()
    number = serializers.IntegerField()
    sha256 = serializers.CharField()
    byte_length = serializers.IntegerField()
    char_length = serializers.IntegerField()
    created_at = serializers.DateTimeField()


class VersionSerializer(VersionSummarySerializer):
    """A version; `content` is present unless the query deferred it (history pages)."""

    document_id = serializers.UUIDField()
    md5 = serializers.CharField()
    frontmatter = serializers.DictField()
    metadata = serializers.DictField()
    change_summary = serializers.CharField()
    author = serializers.CharField(source="author.username", allow_null=True, default=None)
    content = serializers.CharField(required=False)

    def to_representation(self, instance: DocumentVersion) -> dict[str, Any]:
        deferred = instance.get_deferred_fields()
        data: dict[str, Any] = {}
        for field in self._readable_fields:
            if field.field_name in deferred:
                continue  # reading it would cost one query per row
            attribute = field.get_attribute(instance)
            data[field.field_name] = None if attribute is None else field.to_representation(attribute)
        return data


class DocumentSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    reference_uri = serializers.CharField()
    uri = serializers.SerializerMethodField()
    url = serializers.SerializerMethodField()
    namespace = serializers.CharField(source="namespace.slug")
    path = serializers.CharField()
    title = serializers.CharField()
    icon = serializers.CharField()
    kind = serializers.ChoiceField(choices=DocumentKind.values)
    visibility = serializers.ChoiceField(choices=Visibility.values)
    status = serializers.ChoiceField(choices=DocumentStatus.values)
    edit_policy = serializers.ChoiceField(choices=EditPolicy.values)
    first_line_is_title = serializers.SerializerMethodField()
    metadata = serializers.DictField()
    archived = serializers.BooleanField()
    archived_at = serializers.DateTimeField(allow_null=True)
    created_by = serializers.CharField(source="created_by.username", allow_null=True, default=None)
    updated_by = serializers.CharField(source="updated_by.username", allow_null=True, default=None)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    current_version = VersionSummarySerializer()
    content = serializers.CharField(required=False, help_text="Present when include_content is true.")

    def get_uri(self, document: Document | ListedDocument) -> str:
        return f"agor://kb/{document.namespace.slug}/{document.path}"

    def get_url(self, document: Document | ListedDocument) -> str:
        return reader_url(self.context.get("request"), document.namespace.slug, document.path)

    def get_first_line_is_title(self, document: Document | ListedDocument) -> bool:
        return bool(document.metadata.get("title_from_content"))

    def to_representation(self, instance: Document | ListedDocument) -> dict[str, Any]:
        """The declared fields, rendered directly, from a model or a `selectors.listed` row.

        DRF's generic path deep-copies and walks 22 field objects per document (about 1 ms, most
        of a search or list response); this builds the same dict (tests compare the two).
        """
        namespace_slug = instance.namespace.slug
        version = instance.current_version
        zone = self._zone()
        data = {
            "id": str(instance.id),
            "reference_uri": instance.reference_uri,
            "uri": self.get_uri(instance),
            "url": self._reader_url(namespace_slug, instance.path),
            "namespace": namespace_slug,
            "path": instance.path,
            "title": instance.title,
            "icon": instance.icon,
            "kind": str(instance.kind),
            "visibility": str(instance.visibility),
            "status": str(instance.status),
            "edit_policy": str(instance.edit_policy),
            "first_line_is_title": self.get_first_line_is_title(instance),
            "metadata": {str(key): value for key, value in instance.metadata.items()},
            "archived": instance.archived,
            "archived_at": _datetime(instance.archived_at, zone),
            "created_by": instance.created_by.username if instance.created_by_id else None,
            "updated_by": instance.updated_by.username if instance.updated_by_id else None,
            "created_at": _datetime(instance.created_at, zone),
            "updated_at": _datetime(instance.updated_at, zone),
            "current_version": None
            if version is None
            else {
                "id": str(version.id),
                "number": version.number,
                "sha256": version.sha256,
                "byte_length": version.byte_length,
                "char_length": version.char_length,
                "created_at": _datetime(version.created_at, zone),
            },
        }
        if self.context.get("include_content"):
            data["content"] = version.content
        return data

    def _zone(self) -> tzinfo:
        # Looking the zone up costs more than formatting a date: once per response, not per date.
        zone = self.context.get("_zone")
        if zone is None:
            zone = self.context["_zone"] = timezone.get_current_timezone()
        return zone

    def _reader_url(self, namespace_slug: str, path: str) -> str:
        # The base URL is the same for every document of a response: work it out once.
        base = self.context.get("_public_base_url")
        if base is None:
            base = self.context["_public_base_url"] = public_base_url(self.context.get("request"))
        return f"{base}/ui/kb/{quote(namespace_slug)}/{quote(path)}"


def _datetime(value: datetime | None, zone: tzinfo) -> str | None:
    """ISO 8601 in the given zone, UTC written as Z: what DRF's DateTimeField renders."""
    if value is None:
        return None
    text = value.astimezone(zone).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def page_serializer(item: type[serializers.Serializer], name: str) -> type[serializers.Serializer]:
    """A `{total, limit, offset, data}` envelope class for the OpenAPI schema."""
    return type(
        name,
        (serializers.Serializer,),
        {
            "total": serializers.IntegerField(),
            "limit": serializers.IntegerField(),
            "offset": serializers.IntegerField(),
            "data": item(many=True),
        },
    )


NamespacePageSerializer = page_serializer(NamespaceSerializer, "NamespacePage")
DocumentPageSerializer = page_serializer(DocumentSerializer, "DocumentPage")
VersionPageSerializer = page_serializer(VersionSerializer, "VersionPage")


class DocumentWriteSerializer(serializers.Serializer):
    """The result of a write: the document plus whether anything was created or changed."""

    document = DocumentSerializer()
    created = serializers.BooleanField()
    changed = serializers.BooleanField()


class BulkArchiveResultSerializer(serializers.Serializer):
    index = serializers.IntegerField()
    document_id = serializers.CharField()
    ok = serializers.BooleanField()
    status = serializers.ChoiceField(choices=["archived", "restored", "unchanged", "error"])
    archived = serializers.BooleanField(required=False)
    code = serializers.CharField(required=False)
    detail = serializers.CharField(required=False)


class BulkArchiveResponseSerializer(serializers.Serializer):
    archived = serializers.BooleanField()
    results = BulkArchiveResultSerializer(many=True)


class ErrorSerializer(serializers.Serializer):
    detail = serializers.CharField()
    code = serializers.CharField()


class HealthSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["ok", "degraded"])
    version = serializers.CharField()
    database = serializers.DictField()
    timestamp = serializers.DateTimeField()


class MeSerializer(serializers.Serializer):
    user = serializers.CharField()
    workspace = serializers.CharField()
    role = serializers.CharField()
    version = serializers.CharField()


# --- input ---------------------------------------------------------------------------------


class PageQuerySerializer(serializers.Serializer):
    limit = serializers.IntegerField(min_value=1, max_value=200, default=50)
    offset = serializers.IntegerField(min_value=0, max_value=10**9, default=0)


class NamespaceListQuerySerializer(PageQuerySerializer):
    archive_filter = serializers.ChoiceField(choices=ARCHIVE_FILTERS, default="active")
    include_archived = serializers.BooleanField(required=False)
    kind = serializers.ChoiceField(choices=NamespaceKind.values, required=False)


class NamespaceCreateSerializer(serializers.Serializer):
    slug = serializers.RegexField(SLUG_PATTERN, max_length=100)
    display_name = TextField(max_length=200, required=False, allow_blank=True)
    description = TextField(max_length=10000, required=False, allow_blank=True)
    kind = serializers.ChoiceField(choices=NamespaceKind.values, default=NamespaceKind.GLOBAL)
    visibility_default = serializers.ChoiceField(choices=Visibility.values, default=Visibility.PUBLIC)
    others_can = serializers.ChoiceField(choices=OthersCan.values, default=OthersCan.NONE)
    metadata = MetadataField(required=False)


class NamespacePatchSerializer(serializers.Serializer):
    slug = TextField(max_length=100, required=False)
    display_name = TextField(max_length=200, required=False, allow_blank=True)
    description = TextField(max_length=10000, required=False, allow_blank=True)
    kind = serializers.ChoiceField(choices=NamespaceKind.values, required=False)
    visibility_default = serializers.ChoiceField(choices=Visibility.values, required=False)
    others_can = serializers.ChoiceField(choices=OthersCan.values, required=False)
    owner = TextField(max_length=150, required=False, help_text="Username of the new owner.")
    metadata = MetadataField(required=False)
    archived = serializers.BooleanField(required=False)


class AclReplaceSerializer(serializers.Serializer):
    others_can = serializers.ChoiceField(choices=OthersCan.values, required=False)
    entries = AclEntrySerializer(many=True, max_length=500)


class DocumentListQuerySerializer(PageQuerySerializer):
    namespace = TextField(max_length=100, required=False)
    path = TextField(max_length=1024, required=False)
    path_prefix = TextField(max_length=1024, required=False, allow_blank=True)
    kind = serializers.ChoiceField(choices=DocumentKind.values, required=False)
    visibility = serializers.ChoiceField(choices=Visibility.values, required=False)
    status = serializers.ChoiceField(choices=DocumentStatus.values, required=False)
    include_my_drafts = serializers.BooleanField(default=True)
    include_other_user_drafts = serializers.BooleanField(default=False)
    archive_filter = serializers.ChoiceField(choices=ARCHIVE_FILTERS, required=False)
    include_archived = serializers.BooleanField(required=False, help_text="Legacy: true means archive_filter=all.")
    archived = serializers.BooleanField(required=False, help_text="Legacy: true means archived documents only.")
    include_content = serializers.BooleanField(default=False)
    order = serializers.ChoiceField(choices=list(DOCUMENT_ORDERINGS), default="-updated_at")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "archive_filter" not in attrs:
            if attrs.get("archived"):
                attrs["archive_filter"] = "archived"
            elif attrs.get("include_archived"):
                attrs["archive_filter"] = "all"
            else:
                attrs["archive_filter"] = "active"
        return attrs


class DocumentGetQuerySerializer(serializers.Serializer):
    include_content = serializers.BooleanField(default=True)
    include_indexing = serializers.BooleanField(
        default=False, help_text="Add `indexing`: the document's embedding chunks by state."
    )


class DocumentByPathQuerySerializer(DocumentGetQuerySerializer):
    namespace = TextField(max_length=100)
    path = TextField(max_length=1024)
    archive_filter = serializers.ChoiceField(choices=ARCHIVE_FILTERS, default="active")


class VersionListQuerySerializer(PageQuerySerializer):
    limit = serializers.IntegerField(min_value=1, max_value=100, default=20)
    include_content = serializers.BooleanField(default=False)


class DocumentFieldsSerializer(serializers.Serializer):
    title = TextField(max_length=500, required=False, allow_blank=True)
    icon = TextField(max_length=200, required=False, allow_blank=True, allow_null=True)
    kind = serializers.ChoiceField(choices=DocumentKind.values, required=False)
    visibility = serializers.ChoiceField(choices=Visibility.values, required=False)
    status = serializers.ChoiceField(choices=DocumentStatus.values, required=False)
    edit_policy = serializers.ChoiceField(choices=EditPolicy.values, required=False)
    metadata = MetadataField(required=False)


class DocumentCreateSerializer(DocumentFieldsSerializer):
    namespace = TextField(max_length=100)
    path = TextField(max_length=1024)
    content = ContentField()
    first_line_is_title = serializers.BooleanField(required=False, allow_null=True, default=None)
    change_summary = TextField(max_length=1000, required=False, allow_blank=True, default="")


class DocumentUpsertSerializer(DocumentFieldsSerializer):
    namespace = TextField(max_length=100)
    path = TextField(max_length=1024)
    content = ContentField(required=False)
    expected_version = VersionRefField()
    first_line_is_title = serializers.BooleanField(required=False, allow_null=True, default=None)
    change_summary = TextField(max_length=1000, required=False, allow_blank=True, default="")


class DocumentReviseSerializer(serializers.Serializer):
    content = ContentField()
    expected_version = VersionRefField()
    change_summary = TextField(max_length=1000, required=False, allow_blank=True, default="")
    title = TextField(max_length=500, required=False, allow_blank=True)
    first_line_is_title = serializers.BooleanField(required=False, allow_null=True, default=None)


class DocumentPatchSerializer(DocumentFieldsSerializer):
    path = TextField(max_length=1024, required=False)
    archived = serializers.BooleanField(required=False)
    expected_version = VersionRefField()
    expected_archived = serializers.BooleanField(required=False, allow_null=True, default=None)


class BulkArchiveTargetSerializer(serializers.Serializer):
    document_id = TextField(max_length=64)
    expected_version = VersionRefField()
    expected_archived = serializers.BooleanField(required=False, allow_null=True, default=None)


class BulkArchiveSerializer(serializers.Serializer):
    archived = serializers.BooleanField()
    targets = BulkArchiveTargetSerializer(many=True, min_length=1, max_length=50)
