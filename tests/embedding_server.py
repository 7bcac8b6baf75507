"""A loopback stand-in for the OpenAI embeddings API (the one paid external service we call).

Vectors are deterministic hashed bags of words, so texts sharing words are close and a test can
predict rankings. Faults are scripted per request: `fail_next(429, retry_after=1)`,
`delay_next(2.0)`, `wrong_dimensions_next()`, `block_next()` + `release()`. Every request is
recorded in `calls` (inputs, model, dimensions, authorization header).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

WORD = re.compile(r"[a-z0-9]+")


def word_vector(text: str, dimensions: int) -> list[float]:
    """Unit vector of hashed (lightly stemmed) words: shared words mean high cosine."""
    vector = [0.0] * dimensions
    for word in WORD.findall(text.lower()):
        if len(word) > 3 and word.endswith("s"):
            word = word[:-1]
        digest = hashlib.sha256(word.encode()).digest()
        slot = int.from_bytes(digest[:4], "big") % dimensions
        vector[slot] += 1.0 if digest[4] & 1 else -1.0
    norm = math.sqrt(sum(x * x for x in vector))
    if norm == 0:
        vector[0], norm = 1.0, 1.0
    return [x / norm for x in vector]


@dataclass
class Fault:
    status: int = 0
    retry_after: str | None = None
    delay: float = 0.0
    wrong_dimensions: bool = False
    block: threading.Event | None = None
    message: str = "scripted failure"


@dataclass
class Call:
    inputs: list[str]
    model: str
    dimensions: int | None
    authorization: str
    status: int = 200


@dataclass
class EmbeddingServer:
    dimensions: int = 64
    api_key: str = "sk-test-loopback-key"
    port: int = 0  # 0 picks a free one
    calls: list[Call] = field(default_factory=list)
    _faults: deque[Fault] = field(default_factory=deque)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _blocks: list[threading.Event] = field(default_factory=list)

    def start(self) -> EmbeddingServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                server._handle(self)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.release()
        self._httpd.shutdown()
        self._httpd.server_close()

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def inputs(self) -> list[str]:
        return [text for call in self.calls if call.status == 200 for text in call.inputs]

    # --- scripting ---------------------------------------------------------------------------

    def fail_next(self, status: int, *, times: int = 1, retry_after: str | None = None, message: str = "") -> None:
        with self._lock:
            for _ in range(times):
                self._faults.append(Fault(status=status, retry_after=retry_after, message=message or "scripted"))

    def delay_next(self, seconds: float) -> None:
        with self._lock:
            self._faults.append(Fault(delay=seconds))

    def wrong_dimensions_next(self) -> None:
        with self._lock:
            self._faults.append(Fault(wrong_dimensions=True))

    def block_next(self) -> threading.Event:
        """The next request waits (after being recorded) until `release()`; returns 'arrived'."""
        arrived = threading.Event()
        gate = threading.Event()
        self._blocks.append(gate)
        with self._lock:
            self._faults.append(Fault(block=gate))
        self._arrived = arrived
        return arrived

    def release(self) -> None:
        for gate in self._blocks:
            gate.set()

    # --- serving -----------------------------------------------------------------------------

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        try:
            body = json.loads(handler.rfile.read(length) or b"{}")
        except ValueError:
            return self._reply(handler, 400, {"error": {"message": "invalid JSON"}})
        inputs = body.get("input")
        if isinstance(inputs, str):
            inputs = [inputs]
        call = Call(
            inputs=list(inputs or []),
            model=str(body.get("model", "")),
            dimensions=body.get("dimensions"),
            authorization=handler.headers.get("Authorization", ""),
        )
        with self._lock:
            self.calls.append(call)
            fault = self._faults.popleft() if self._faults else Fault()
        if fault.block is not None:
            getattr(self, "_arrived", threading.Event()).set()
            fault.block.wait(30)
        if fault.delay:
            time.sleep(fault.delay)
        if call.authorization != f"Bearer {self.api_key}":
            call.status = 401
            presented = call.authorization.removeprefix("Bearer ")
            # Like OpenAI, echo the presented key: clients must scrub it from their errors.
            return self._reply(handler, 401, {"error": {"message": f"Incorrect API key provided: {presented}"}})
        if fault.status:
            call.status = fault.status
            headers = {"Retry-After": fault.retry_after} if fault.retry_after else {}
            return self._reply(handler, fault.status, {"error": {"message": fault.message}}, headers)
        dims = int(call.dimensions or self.dimensions)
        if fault.wrong_dimensions:
            dims += 1
        data = [
            {"object": "embedding", "index": i, "embedding": word_vector(text, dims)} for i, text in enumerate(inputs)
        ]
        data.reverse()  # clients must order by `index`, not by position
        return self._reply(handler, 200, {"object": "list", "data": data, "model": call.model})

    @staticmethod
    def _reply(handler: BaseHTTPRequestHandler, status: int, payload: dict[str, Any], headers: Any = None) -> None:
        raw = json.dumps(payload).encode()
        try:
            handler.send_response(status)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(raw)))
            for name, value in (headers or {}).items():
                handler.send_header(name, value)
            handler.end_headers()
            handler.wfile.write(raw)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test)
