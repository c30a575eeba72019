"""The threads that talk to a running sandbox: replies to its stdin, its output drained, its
messages read. None of them can block the watch: a sandbox that stops reading or writing stalls
only its own thread, which the grader abandons once every process of the sandbox is gone."""

from __future__ import annotations

import json
import threading


class Replies(threading.Thread):
    """Writes the grader's replies to the runner's stdin, so a full pipe blocks only this thread."""

    def __init__(self, stream):
        super().__init__(daemon=True)
        self.stream, self.todo = stream, []
        self.ready = threading.Condition()
        self.stopped = False
        self.start()

    def put(self, data: bytes) -> None:
        with self.ready:
            self.todo.append(data)
            self.ready.notify()

    def stop(self) -> None:
        with self.ready:
            self.stopped = True
            self.ready.notify()
        try:
            self.stream.close()  # the sandbox is gone: a blocked write fails now
        except OSError:
            pass

    def run(self):
        while True:
            with self.ready:
                while not self.todo and not self.stopped:
                    self.ready.wait()
                if self.stopped:
                    return
                data = self.todo.pop(0)
            try:
                if data:
                    self.stream.write(data)
                    self.stream.flush()
                else:
                    self.stream.close()
            except (BrokenPipeError, ValueError, OSError):
                return  # the sandbox is gone or closed its stdin: its result will say so


class Drain(threading.Thread):
    """Read a stream to its end, keeping the first ``cap`` bytes."""

    def __init__(self, stream, cap: int):
        super().__init__(daemon=True)
        self.stream, self.cap, self.kept, self.dropped = stream, cap, bytearray(), 0
        self.start()

    def run(self):
        try:
            while chunk := self.stream.read1(65536):
                room = self.cap - len(self.kept)
                self.kept += chunk[:max(room, 0)]
                self.dropped += max(len(chunk) - max(room, 0), 0)
        except (OSError, ValueError):
            pass

    def text(self) -> str:
        return bytes(self.kept).decode("utf-8", errors="replace")


class Lines(threading.Thread):
    """Newline-delimited JSON messages from a stream, up to ``cap`` bytes in all. A message whose
    ``event`` is in ``wake_for``, or the stream's end, wakes :meth:`wait` (other messages do not: a
    sandbox that floods the stream cannot make the watch spin)."""

    def __init__(self, stream, cap: int, wake_for=frozenset()):
        super().__init__(daemon=True)
        self.stream, self.cap, self.read_bytes, self.overflow = stream, cap, 0, False
        self.lock, self.pending = threading.Lock(), []
        self.wake_for = frozenset(wake_for)
        self.arrived = threading.Event()
        self.ended = False
        self.start()

    def run(self):
        try:
            with self.stream:
                # never more than what is left of the cap in memory at once, however long a line is
                while line := self.stream.readline(max(self.cap - self.read_bytes, 0) + 1):
                    self.read_bytes += len(line)
                    if self.read_bytes > self.cap:
                        self.overflow = True
                        while self.stream.read1(65536):  # keep draining so the writer never blocks
                            pass
                        break
                    try:
                        message = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(message, dict):
                        with self.lock:
                            self.pending.append(message)
                        if message.get("event") in self.wake_for:
                            self.arrived.set()
        except (OSError, ValueError):
            pass
        finally:
            self.ended = True
            self.arrived.set()

    def wait(self, timeout: float) -> None:
        """Until a waking message arrives or the stream ends, at most ``timeout`` seconds (one wake-up each)."""
        self.arrived.wait(timeout)
        self.arrived.clear()

    def take(self) -> list[dict]:
        with self.lock:
            taken, self.pending = self.pending, []
        return taken
