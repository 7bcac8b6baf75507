"""OpenAPI generation tweaks."""

from typing import Any

from drf_spectacular.openapi import AutoSchema


class KnowledgeAutoSchema(AutoSchema):
    """Our list endpoints answer a `{total, limit, offset, data}` envelope, never a bare array.

    Without a serializer the question is about naming (operation ids stay `..._list`); with
    one it is about wrapping the response in an array, which we never want.
    """

    def _is_list_view(self, serializer: Any = None) -> bool:
        if serializer is None:
            return super()._is_list_view()
        return False
