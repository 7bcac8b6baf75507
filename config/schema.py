"""OpenAPI generation tweaks."""

from typing import Any

from drf_spectacular.openapi import AutoSchema


class KnowledgeAutoSchema(AutoSchema):
    """Our list endpoints answer a `{total, limit, offset, data}` envelope, never a bare array."""

    def _is_list_view(self, serializer: Any = None) -> bool:
        return False
