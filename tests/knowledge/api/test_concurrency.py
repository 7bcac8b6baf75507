"""Concurrent writers through the real HTTP server: no lost update, contiguous versions."""

from __future__ import annotations

import threading

import httpx
import pytest

from tests.conftest import create_document, create_namespace

pytestmark = pytest.mark.django_db(transaction=True)

WRITERS = 8


def test_eight_writers_with_the_same_expected_version(http, alice, live_server):
    create_namespace(http, alice, "race")
    doc = create_document(http, alice, "race", "hot.md", "v1")
    barrier = threading.Barrier(WRITERS)
    results: list[tuple[int, dict]] = []
    lock = threading.Lock()

    def write(i: int) -> None:
        with httpx.Client(base_url=live_server.url, headers=alice.headers, timeout=60) as client:
            barrier.wait()
            response = client.post(
                f"/kb/documents/{doc['id']}/revise", json={"content": f"writer {i}", "expected_version": 1}
            )
        with lock:
            results.append((response.status_code, response.json()))

    threads = [threading.Thread(target=write, args=(i,)) for i in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    codes = sorted(code for code, _ in results)
    assert codes == [200] + [409] * (WRITERS - 1), results
    winner = next(body for code, body in results if code == 200)
    for code, body in results:
        if code == 409:
            assert body["code"] == "version_conflict"
            assert body["current_version"]["number"] == 2
    history = http.as_(alice).get(f"/kb/documents/{doc['id']}/versions", params={"include_content": "true"}).json()
    assert [v["number"] for v in history["data"]] == [2, 1]
    current = http.as_(alice).get(f"/kb/documents/{doc['id']}").json()
    assert current["current_version"]["id"] == winner["current_version"]["id"]
    assert current["content"] == history["data"][0]["content"]


def test_writers_who_retry_with_the_current_version_all_land(http, alice, live_server):
    """Each writer retries on 409 with the version it is told; every write lands exactly once."""
    create_namespace(http, alice, "retry")
    doc = create_document(http, alice, "retry", "log.md", "start")
    barrier = threading.Barrier(4)

    def write(i: int) -> None:
        with httpx.Client(base_url=live_server.url, headers=alice.headers, timeout=60) as client:
            barrier.wait()
            expected = 1
            for _ in range(50):
                response = client.post(
                    f"/kb/documents/{doc['id']}/revise", json={"content": f"writer {i}", "expected_version": expected}
                )
                if response.status_code == 200:
                    return
                assert response.status_code == 409, response.text
                expected = response.json()["current_version"]["number"]
            raise AssertionError("writer never landed")

    threads = [threading.Thread(target=write, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    history = http.as_(alice).get(f"/kb/documents/{doc['id']}/versions", params={"include_content": "true"}).json()
    assert [v["number"] for v in history["data"]] == [5, 4, 3, 2, 1]
    assert sorted(v["content"] for v in history["data"][:4]) == [f"writer {i}" for i in range(4)]
