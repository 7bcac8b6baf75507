"""Human progress on stderr: an animated line on a terminal, periodic newline updates otherwise.

`<phase>: <done> / <total> [<bytes> / <total> bytes] | elapsed Ns`, or `<phase>: N discovered`
while the total is not known yet. Output is throttled (500 ms on a terminal, 2 s redirected) and
always written at 0 and at the total, so logs show where a run started and where it stopped.
While a long request is in flight, a heartbeat redraws the line every 5 s (elapsed time moves).
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

from transfer.terminal import escape_text


class Progress:
    def __init__(self, stream: TextIO | None = None, *, tty: bool | None = None, quiet: bool = False) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.quiet = quiet
        self.interval = 0.5 if self.tty else 2.0
        self.started = time.monotonic()
        self.phase = ""
        self.total: int | None = None
        self.total_bytes: int | None = None
        self.done = 0
        self.bytes_done = 0
        self.last_line = ""
        self._last_write = 0.0
        self._open = False
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self._active = False

    HEARTBEAT_SECONDS = 5.0

    def _tick(self) -> None:
        while not self._stop.wait(1.0):
            if self._active and time.monotonic() - self._last_write >= self.HEARTBEAT_SECONDS:
                self._draw(force=True)

    def close(self) -> None:
        self._stop.set()
        self.finish()
        self.phase = ""

    def start(self, phase: str, total: int | None = None, total_bytes: int | None = None) -> None:
        self.finish()
        if self._ticker is None and not self.quiet:
            self._ticker = threading.Thread(target=self._tick, name="agor-progress", daemon=True)
            self._ticker.start()
        self.phase, self.total, self.total_bytes = phase, total, total_bytes
        self.done = self.bytes_done = 0
        self._active = True
        self._draw(force=True)

    def advance(self, count: int = 1, nbytes: int = 0) -> None:
        self.done += count
        self.bytes_done += nbytes
        self._draw(force=self.total is not None and self.done >= self.total)

    def discovered(self, count: int) -> None:
        self.done = count
        self._draw()

    def heartbeat(self) -> None:
        self._draw()

    def _text(self) -> str:
        elapsed = int(time.monotonic() - self.started)
        if self.total is None:
            return f"{self.phase}: {self.done} discovered | elapsed {elapsed}s"
        text = f"{self.phase}: {self.done} / {self.total}"
        if self.total_bytes is not None:
            text += f" {self.bytes_done} / {self.total_bytes} bytes"
        return f"{text} | elapsed {elapsed}s"

    def _draw(self, *, force: bool = False) -> None:
        with self._lock:
            self._draw_locked(force=force)

    def _draw_locked(self, *, force: bool) -> None:
        now = time.monotonic()
        if not force and now - self._last_write < self.interval:
            return
        self._last_write = now
        self.last_line = self._text()
        if self.quiet:
            return
        if self.tty:
            self.stream.write("\r\x1b[K" + self.last_line)
            self._open = True
        else:
            self.stream.write(self.last_line + "\n")
        self.stream.flush()

    def finish(self) -> None:
        with self._lock:
            if self._active and (self.total is None or self.done < (self.total or 0)):
                self._draw_locked(force=True)
            self._active = False
            if self._open:
                self.stream.write("\n")
                self.stream.flush()
                self._open = False

    def line(self, text: str) -> None:
        """A standalone message (plan summary, reminders), escaped."""
        with self._lock:
            if self._open:
                self.stream.write("\n")
                self._open = False
            if not self.quiet:
                self.stream.write(escape_text(text, multiline=True) + "\n")
                self.stream.flush()

    def stopped(self) -> None:
        if self.last_line:
            self.line(f"Stopped: {self.last_line}")
