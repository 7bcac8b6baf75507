"""Embedding providers against a loopback OpenAI-compatible server, and the offline local model."""

from __future__ import annotations

import math
import socket
from email.utils import formatdate

import pytest

from knowledge.embeddings.providers import (
    EmbeddingSpec,
    LocalProvider,
    ProviderError,
    provider_for,
    retry_after_seconds,
)
from tests.embedding_server import EmbeddingServer

KEY = "sk-test-loopback-key"


@pytest.fixture
def server():
    running = EmbeddingServer(dimensions=16, api_key=KEY).start()
    yield running
    running.stop()


def spec(server: EmbeddingServer, **fields) -> EmbeddingSpec:
    values = {
        "provider": "openai-compatible",
        "model": "test-embed",
        "dimensions": 16,
        "base_url": server.url,
        "api_key": KEY,
        "timeout": 5.0,
        "max_attempts": 4,
    }
    values.update(fields)
    return EmbeddingSpec(**values)


class Sleeps(list):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def test_vectors_come_back_in_input_order_with_the_bearer_key(server):
    from tests.embedding_server import word_vector

    texts = ["alpha beta", "gamma", "delta epsilon zeta"]
    vectors = provider_for(spec(server)).embed(texts)
    assert vectors == [pytest.approx(word_vector(t, 16)) for t in texts]  # the server answers in reverse
    (call,) = server.calls
    assert call.authorization == f"Bearer {KEY}" and call.inputs == texts and call.model == "test-embed"
    assert call.dimensions is None  # compatible servers are not sent OpenAI's `dimensions`


def test_openai_sends_dimensions(server):
    provider = provider_for(spec(server, provider="openai", model="text-embedding-3-small", dimensions=8))
    assert len(provider.embed(["hello"])[0]) == 8
    assert server.calls[0].dimensions == 8


def test_rate_limit_honours_retry_after_then_succeeds(server):
    server.fail_next(429, retry_after="1.5")
    sleeps = Sleeps()
    vectors = provider_for(spec(server), sleep=sleeps).embed(["x"])
    assert len(vectors) == 1 and sleeps == [1.5] and len(server.calls) == 2


def test_server_errors_back_off_with_jitter_and_give_up_retryable(server):
    server.fail_next(503, times=4)
    sleeps = Sleeps()
    with pytest.raises(ProviderError) as caught:
        provider_for(spec(server), sleep=sleeps).embed(["x"])
    assert caught.value.code == "provider_unavailable" and caught.value.retryable
    assert len(server.calls) == 4 and len(sleeps) == 3
    assert all(0 <= wait <= 0.5 * 2**attempt for attempt, wait in enumerate(sleeps, start=1))


def test_retry_after_longer_than_we_block_is_returned_to_the_caller(server):
    server.fail_next(429, retry_after="120")
    sleeps = Sleeps()
    with pytest.raises(ProviderError) as caught:
        provider_for(spec(server, max_backoff=10), sleep=sleeps).embed(["x"])
    assert caught.value.retryable and caught.value.retry_after == 120 and sleeps == []


def test_one_attempt_means_one_call(server):
    server.fail_next(500)
    with pytest.raises(ProviderError) as caught:
        provider_for(spec(server, max_attempts=1)).embed(["x"])
    assert caught.value.retryable and len(server.calls) == 1


@pytest.mark.parametrize(
    "status, code",
    [(400, "bad_request"), (404, "bad_request"), (422, "bad_request"), (403, "auth_failed")],
)
def test_permanent_failures_are_not_retried(server, status, code):
    server.fail_next(status, times=3)
    with pytest.raises(ProviderError) as caught:
        provider_for(spec(server)).embed(["x"])
    assert caught.value.code == code and not caught.value.retryable and len(server.calls) == 1


def test_a_wrong_key_is_auth_failed_and_the_key_is_never_in_the_message(server):
    wrong = "sk-wrong-" + "z" * 30
    with pytest.raises(ProviderError) as caught:
        provider_for(spec(server, api_key=wrong)).embed(["x"])
    assert caught.value.code == "auth_failed" and not caught.value.retryable
    assert wrong not in str(caught.value) and "[redacted]" in str(caught.value)
    assert wrong not in repr(spec(server, api_key=wrong))


def test_wrong_dimensions_are_refused(server):
    server.wrong_dimensions_next()
    with pytest.raises(ProviderError) as caught:
        provider_for(spec(server)).embed(["x"])
    assert caught.value.code == "dimension_mismatch" and not caught.value.retryable


def test_timeouts_are_retryable(server):
    server.delay_next(2.0)
    with pytest.raises(ProviderError) as caught:
        provider_for(spec(server, timeout=0.3, max_attempts=1)).embed(["x"])
    assert caught.value.code == "timeout" and caught.value.retryable


def test_unreachable_provider_is_retryable():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    unreachable = EmbeddingSpec("openai-compatible", "m", 4, f"http://127.0.0.1:{port}/v1", KEY, 1.0, 1)
    with pytest.raises(ProviderError) as caught:
        provider_for(unreachable).embed(["x"])
    assert caught.value.code == "unreachable" and caught.value.retryable


def test_retry_after_accepts_seconds_and_http_dates():
    assert retry_after_seconds("7") == 7.0
    assert retry_after_seconds(None) is None and retry_after_seconds("soon") is None
    assert 25 <= retry_after_seconds(formatdate(__import__("time").time() + 30, usegmt=True)) <= 31


def test_local_model_is_offline_normalised_and_semantic():
    provider = LocalProvider(EmbeddingSpec("local", "all-MiniLM-L6-v2", 384))
    reset, steps, pods = provider.embed(
        ["How do I reset my password?", "Steps to recover a forgotten login password", "Scheduling Kubernetes pods"]
    )
    assert len(reset) == 384 and math.isclose(sum(x * x for x in reset), 1.0, rel_tol=1e-4)

    def cosine(a, b):
        return sum(x * y for x, y in zip(a, b, strict=True))

    assert cosine(reset, steps) > cosine(reset, pods) + 0.3
