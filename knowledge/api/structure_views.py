"""GET outline and range, POST edits: structure-aware reads and line-precise writes.

The pure work lives in `knowledge.structure` and `knowledge.edits`; the write in
`knowledge.edit_services.document_edit`. These views parse input and shape output.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from uuid import UUID

from django.http import HttpResponse
from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from knowledge import selectors, structure, version_cache
from knowledge.api import serializers as s
from knowledge.api.search_views import VersionTokenSerializer
from knowledge.api.views import parse, responses
from knowledge.edit_services import document_edit
from knowledge.edits import OP_TYPES, EditOp, op_from_dict
from knowledge.models import Document, DocumentVersion
from workspaces.access import Actor

MAX_LINE = 10**9  # far beyond any document (10 MiB); larger values are input errors, not ranges
MAX_VERSION_NUMBER = 2**31 - 1
MAX_OPS = 100


# --- input -------------------------------------------------------------------------------------


class VersionParamField(s.TextField):
    """A version number or a version id, checked here so a lookup never sees a malformed value."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("help_text", "Version number or version id; default: the current version.")
        super().__init__(max_length=64, required=False, allow_blank=True, **kwargs)

    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data).strip()
        if not value:
            return ""
        if value.isascii() and value.isdigit():
            if not 1 <= int(value) <= MAX_VERSION_NUMBER:
                raise serializers.ValidationError(f"version must be between 1 and {MAX_VERSION_NUMBER}.")
            return str(int(value))
        try:
            return str(UUID(value))
        except ValueError as exc:
            raise serializers.ValidationError("version must be a version number or a version id.") from exc


def _line_field(**kwargs: Any) -> serializers.IntegerField:
    return serializers.IntegerField(min_value=1, max_value=MAX_LINE, **kwargs)


class OutlineQuerySerializer(serializers.Serializer):
    version = VersionParamField()
    max_depth = serializers.IntegerField(min_value=1, max_value=structure.MAX_DEPTH, default=structure.MAX_DEPTH)


class RangeQuerySerializer(serializers.Serializer):
    version = VersionParamField()
    section_ref = s.TextField(max_length=1000, required=False, help_text="From the outline, e.g. root.h1[1].h2[2].")
    heading_path = s.TextField(max_length=10000, required=False, help_text="Titles joined with ' > '.")
    occurrence = serializers.IntegerField(min_value=1, max_value=MAX_LINE, default=1)
    start_line = _line_field(required=False)
    end_line = _line_field(required=False)
    context_lines = serializers.IntegerField(min_value=0, max_value=20, default=2)
    offset_lines = serializers.IntegerField(min_value=0, max_value=MAX_LINE, required=False)
    max_lines = serializers.IntegerField(min_value=1, max_value=1000, required=False)
    include_line_numbers = serializers.BooleanField(default=True)


class StrictSerializer(serializers.Serializer):
    """Rejects unknown keys: a misspelt guard (`expectedText`, `dryRun`) must not be ignored."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            unknown = sorted(str(key) for key in data if key not in self.fields)
            if unknown:
                raise serializers.ValidationError({key: ["Unknown field."] for key in unknown})
        return super().to_internal_value(data)


def _op_type(name: str) -> serializers.ChoiceField:
    return serializers.ChoiceField(choices=[name])


class ReplaceLineRangeOpSerializer(StrictSerializer):
    """Replace lines start_line..end_line; the guards compare the current lines joined with LF."""

    type = _op_type("replace_line_range")
    start_line = _line_field()
    end_line = _line_field()
    replacement = s.ContentField(help_text="New lines joined with LF; a trailing LF adds an empty line.")
    expected_text = s.ContentField(required=False, help_text="The current lines joined with LF.")
    expected_md5 = serializers.RegexField(
        r"^[0-9a-fA-F]{32}$", required=False, help_text="md5 of the current lines (content_md5 of a range)."
    )


class InsertAtLineOpSerializer(StrictSerializer):
    """Insert lines before or after `line`; the neighbour guard compares the text of `line`."""

    type = _op_type("insert_at_line")
    line = _line_field(help_text="'before' accepts line_count + 1 (append); 'after' needs an existing line.")
    position = serializers.ChoiceField(choices=["before", "after"], default="before")
    content = s.ContentField(help_text="Lines joined with LF.")
    expected_neighbor_text = s.ContentField(required=False, help_text="The current text of `line`.")


class DeleteLineRangeOpSerializer(StrictSerializer):
    """Delete lines start_line..end_line."""

    type = _op_type("delete_line_range")
    start_line = _line_field()
    end_line = _line_field()
    expected_text = s.ContentField(required=False)
    expected_md5 = serializers.RegexField(r"^[0-9a-fA-F]{32}$", required=False)


class ReplaceLiteralOpSerializer(StrictSerializer):
    """Replace every occurrence of `find`; fails unless there are exactly `expected_count`."""

    type = _op_type("replace_literal")
    find = s.TextField(trim_whitespace=False, help_text="Non-empty text; may span lines.")
    replace = s.ContentField()
    expected_count = serializers.IntegerField(
        min_value=0, max_value=MAX_LINE, help_text="Exact number of non-overlapping matches."
    )


OP_SERIALIZERS: dict[str, type[serializers.Serializer]] = {
    "replace_line_range": ReplaceLineRangeOpSerializer,
    "insert_at_line": InsertAtLineOpSerializer,
    "delete_line_range": DeleteLineRangeOpSerializer,
    "replace_literal": ReplaceLiteralOpSerializer,
}


@extend_schema_field(
    PolymorphicProxySerializer(
        component_name="EditOp", serializers=OP_SERIALIZERS, resource_type_field_name="type", many=False
    )
)
class EditOpField(serializers.Field):
    """One op, validated by the serializer its `type` names."""

    def to_internal_value(self, data: Any) -> EditOp:
        if not isinstance(data, Mapping):
            raise serializers.ValidationError("Each op must be an object with a type.")
        op_type = data.get("type")
        serializer_class = OP_SERIALIZERS.get(op_type) if isinstance(op_type, str) else None
        if serializer_class is None:
            raise serializers.ValidationError({"type": [f"type must be one of: {', '.join(OP_TYPES)}."]})
        serializer = serializer_class(data=data)
        if not serializer.is_valid():
            raise serializers.ValidationError(serializer.errors)
        return op_from_dict(serializer.validated_data)

    def to_representation(self, value: Any) -> Any:
        return value


class DocumentEditSerializer(StrictSerializer):
    """Ops applied in order to one base version; unknown keys are rejected, not ignored."""

    expected_version = s.VersionRefField(help_text="Required unless dry_run: the version the ops were written for.")
    ops = serializers.ListField(child=EditOpField(), min_length=1, max_length=MAX_OPS)
    dry_run = serializers.BooleanField(default=False)
    change_summary = s.TextField(max_length=1000, required=False, allow_blank=True, default="")
    include_content = serializers.BooleanField(default=False)


# --- output ------------------------------------------------------------------------------------


class OutlineHeadingSerializer(serializers.Serializer):
    level = serializers.IntegerField()
    title = serializers.CharField()
    heading_path = serializers.CharField(help_text="Ancestor titles and this one, joined with ' > '.")
    section_ref = serializers.CharField(help_text="root + .h<level>[<ordinal>] per ancestor, ending with this one.")
    occurrence = serializers.IntegerField(help_text="1 for the first heading with this heading_path, then 2, ...")
    start_line = serializers.IntegerField()
    end_line = serializers.IntegerField()
    content_start_line = serializers.IntegerField(help_text="The line after the heading.")
    chars = serializers.IntegerField(help_text="Characters of the section, heading line included.")
    anchor = serializers.CharField()


class DocumentOutlineSerializer(serializers.Serializer):
    document = s.DocumentSerializer()
    version = VersionTokenSerializer()
    line_count = serializers.IntegerField()
    headings = OutlineHeadingSerializer(many=True)


class LineRangeSourceSerializer(serializers.Serializer):
    start_line = serializers.IntegerField()
    end_line = serializers.IntegerField()
    omitted_before = serializers.IntegerField()
    omitted_after = serializers.IntegerField()


class LineRangeSerializer(serializers.Serializer):
    start_line = serializers.IntegerField()
    end_line = serializers.IntegerField()
    context_start_line = serializers.IntegerField()
    context_end_line = serializers.IntegerField()
    source_range = LineRangeSourceSerializer(required=False, help_text="The selection before paging; only when paged.")
    content = serializers.CharField(help_text="The lines with context, joined with LF.")
    numbered_content = serializers.CharField(required=False, help_text="`N: line` per line, unless disabled.")
    content_md5 = serializers.CharField(help_text="md5 of the selected lines only (no context); use as expected_md5.")


class DocumentRangeSerializer(serializers.Serializer):
    document = s.DocumentSerializer()
    version = VersionTokenSerializer()
    line_count = serializers.IntegerField()
    range = LineRangeSerializer()


class ChangedRangeSerializer(serializers.Serializer):
    start_line = serializers.IntegerField()
    end_line = serializers.IntegerField(help_text="start_line - 1 for a pure deletion (an empty range).")


class DocumentEditResultSerializer(serializers.Serializer):
    dry_run = serializers.BooleanField()
    changed = serializers.BooleanField()
    document = s.DocumentSerializer()
    base_version = VersionTokenSerializer()
    new_version = VersionTokenSerializer(allow_null=True, help_text="null when nothing was written.")
    diff = serializers.CharField(help_text="Unified diff from the base version; empty when nothing changes.")
    changed_ranges = ChangedRangeSerializer(many=True)
    content = serializers.CharField(required=False, help_text="The resulting content, when include_content.")


# --- views -------------------------------------------------------------------------------------


def _token(version: DocumentVersion) -> dict[str, Any]:
    return {"id": str(version.id), "number": version.number, "sha256": version.sha256}


def _document_data(request: Request, document: Document) -> dict[str, Any]:
    return s.DocumentSerializer(document, context={"request": request, "include_content": False}).data


def _read(actor: Actor, document_id: str, version: str) -> tuple[Document, DocumentVersion]:
    """The document and the asked-for version, both without content (see `version_lines`)."""
    document = selectors.document_get(actor=actor, document_id=document_id, include_content=False)
    if version:
        return document, selectors.version_get(actor=actor, document=document, version=version, include_content=False)
    return document, document.current_version


class DocumentOutlineView(APIView):
    """Headings of a version with their line ranges, breadcrumbs and section refs."""

    @extend_schema(
        operation_id="kb_documents_outline_retrieve",
        parameters=[OutlineQuerySerializer],
        responses=responses(DocumentOutlineSerializer),
    )
    def get(self, request: Request, id: str) -> Response:
        query = parse(OutlineQuerySerializer, request.query_params)
        document, version = _read(request.actor, id, query.get("version", ""))
        found = selectors.version_outline(version=version)
        head = JSONRenderer().render(
            {"document": _document_data(request, document), "version": _token(version), "line_count": found.line_count}
        )
        headings = _headings_json(version, found, query["max_depth"])
        return HttpResponse(head[:-1] + b',"headings":' + headings + b"}", content_type="application/json")


def _headings_json(version: DocumentVersion, found: structure.Outline, max_depth: int) -> bytes:
    """The headings as JSON, rendered once per version and depth.

    They never change for a version and are most of the response: 1.4 MB for the 5,000
    headings of a 10 MiB document, ~15 ms to encode on every read otherwise.
    """

    def render() -> tuple[bytes, int]:
        body = JSONRenderer().render([heading.as_dict() for heading in found.up_to(max_depth)])
        return body, len(body)

    return version_cache.cached(("outline-json", version.pk, max_depth), render)


class DocumentRangeView(APIView):
    """A section (by section_ref or heading_path) or a line range, with context and its md5."""

    @extend_schema(
        operation_id="kb_documents_range_retrieve",
        parameters=[RangeQuerySerializer],
        responses=responses(DocumentRangeSerializer),
    )
    def get(self, request: Request, id: str) -> Response:
        query = parse(RangeQuerySerializer, request.query_params)
        document, version = _read(request.actor, id, query.pop("version", ""))
        found = selectors.version_outline(version=version)
        selected = structure.select_range(selectors.version_lines(version=version), found=found, **query)
        return Response(
            {
                "document": _document_data(request, document),
                "version": _token(version),
                "line_count": found.line_count,
                "range": selected.as_dict(),
            }
        )


class DocumentEditView(APIView):
    """Apply line-precise ops as exactly one new version, or preview them with dry_run."""

    @extend_schema(
        operation_id="kb_documents_edits_create",
        request=DocumentEditSerializer,
        responses=responses(DocumentEditResultSerializer, 200, 403, 409, 413),
    )
    def post(self, request: Request, id: str) -> Response:
        data = parse(DocumentEditSerializer, request.data)
        result = document_edit(
            actor=request.actor,
            document_id=id,
            ops=data["ops"],
            expected_version=data.get("expected_version"),
            dry_run=data["dry_run"],
            change_summary=data["change_summary"],
        )
        document = result.document
        if result.new_version is not None:
            document = selectors.document_get(actor=request.actor, document_id=document.pk)
        body: dict[str, Any] = {
            "dry_run": result.dry_run,
            "changed": result.changed,
            "document": _document_data(request, document),
            "base_version": _token(result.base_version),
            "new_version": _token(result.new_version) if result.new_version is not None else None,
            "diff": result.diff,
            "changed_ranges": [{"start_line": r.start_line, "end_line": r.end_line} for r in result.changed_ranges],
        }
        if data["include_content"]:
            body["content"] = result.content
        return Response(body)
