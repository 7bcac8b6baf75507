"""Which transfer failures stop a run and which only fail one document, and how they are reported.

Per-document (the run continues, then exits unsuccessfully): during export/import/reconcile, a
409, a 413 other than the namespace-wide limit, a 500, a 404 for one body while exporting, and
400s with a known per-document code. Everything else stops the run: 400 schema errors, 401,
403, other 404s, 405, 429, 5xx gateways, transport errors, planning failures, namespace create,
cancellation and unsafe local files. Details name the plan key and the source document id and
never content, titles, URLs or tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from transfer.client import ApiError

MAX_DETAILS = 20
PER_DOCUMENT_CODES = {
    "checksum_mismatch",
    "content_mismatch",
    "invalid_content",
    "invalid_path",
    "content_too_large",
    "missing",
    "too_large",
}
DOCUMENT_STAGES = ("exporting", "importing", "reconciling")
GUIDANCE = {
    401: "Log in again with `agor login --url URL`.",
    403: "Import needs workspace member access; export needs a workspace admin.",
    409: "Nothing was overwritten; see the code for what differs.",
    429: "Wait for the rate limit to reset, then resume.",
}


class TransferError(Exception):
    """A sanitized failure: stage, what failed, and whether other documents may continue."""

    def __init__(
        self,
        message: str,
        *,
        stage: str,
        fatal: bool = True,
        key: str | None = None,
        source_id: str | None = None,
        exit_code: int = 1,
    ) -> None:
        self.message = message
        self.stage = stage
        self.fatal = fatal
        self.key = key
        self.source_id = source_id
        self.exit_code = exit_code
        super().__init__(message)

    def detail(self) -> str:
        label = ""
        if self.key:
            label = f"{self.key} (source {self.source_id or 'unknown'}): "
        return f"{label}{self.message}"


def describe(exc: ApiError) -> str:
    if exc.transport:
        return f"transport failure ({exc.method} {exc.route})"
    text = f"HTTP {exc.status} {exc.code} ({exc.method} {exc.route})"
    if exc.status == 400 and exc.code == "invalid":
        fields = ", ".join(exc.fields) if exc.fields else "unknown fields"
        text = (
            f"Invalid Knowledge transfer request ({exc.method} {exc.route}): {fields}. Do not retry with --apply "
            "repeatedly; compare `agor --version` with the deployment's /health version."
        )
    guidance = GUIDANCE.get(exc.status)
    return f"{text}. {guidance}" if guidance else text


def from_api(exc: ApiError, *, stage: str, key: str | None = None, source_id: str | None = None) -> TransferError:
    """Classify a failed request by stage and status (see the module docstring)."""
    per_document = stage in DOCUMENT_STAGES and (
        exc.status in (409, 500)
        or (exc.status == 413 and exc.code != "transfer_limit")
        or (exc.status == 404 and stage == "exporting" and key is not None)
        or (exc.status == 400 and exc.code in PER_DOCUMENT_CODES)
    )
    return TransferError(f"{stage}: {describe(exc)}", stage=stage, fatal=not per_document, key=key, source_id=source_id)


def item_failure(
    *, stage: str, key: str, source_id: str | None, code: str, http_status: int | None = None
) -> TransferError:
    """A per-item failure reported inside a successful batch answer."""
    status = f"HTTP {http_status} " if http_status else ""
    return TransferError(f"{stage}: {status}{code}", stage=stage, fatal=False, key=key, source_id=source_id)


@dataclass
class Failures:
    items: list[TransferError] = field(default_factory=list)

    def add(self, error: TransferError) -> None:
        self.items.append(error)

    def __len__(self) -> int:
        return len(self.items)

    def details(self) -> list[str]:
        lines = [error.detail() for error in self.items[:MAX_DETAILS]]
        if len(self.items) > MAX_DETAILS:
            lines.append(f"{len(self.items) - MAX_DETAILS} additional failures omitted")
        return lines


def unreliable(what: str, reason: str) -> TransferError:
    """The inventory shifted or contradicted itself while paging: stop rather than guess."""
    return TransferError(f"planning: the {what} inventory is unreliable ({reason}).", stage="planning")


def document_failure(error: TransferError, *, key: str, source_id: str | None) -> TransferError:
    """A whole-request per-document failure, charged to one document of the batch."""
    return TransferError(error.message, stage=error.stage, fatal=False, key=key, source_id=source_id)
