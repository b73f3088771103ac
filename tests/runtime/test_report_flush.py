"""``flush`` returns only once every report added before it has been posted, even when
the background thread took them and its post is still in flight.

The bug it guards against: the trainer calls ``flush`` and then exits at once. If the
background thread had just taken the buffer (the final loss report among it), ``flush``
found the buffer empty and returned while that post was in flight, and the exit cut
it off. Here a loopback server holds the background thread's post for 0.5 s: ``flush``
called meanwhile must not return before the server has finished with it.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

from shapeshift.client.lease import WorkerEnv
from shapeshift.client.report import _Reporter


class _SlowMetrics(BaseHTTPRequestHandler):
    received: ClassVar[threading.Event] = threading.Event()
    finished: ClassVar[list[list[int]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).received.set()
        time.sleep(0.5)
        type(self).finished.append([r["step"] for r in body["reports"]])
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_flush_waits_for_the_post_the_background_thread_has_in_flight():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SlowMetrics)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        env = WorkerEnv(job_id="j", controller=f"http://127.0.0.1:{server.server_port}", lease_key="k")
        reporter = _Reporter(env, interval=0.01)
        reporter.add({"step": 1})
        assert _SlowMetrics.received.wait(5), "the background thread never posted"
        reporter.flush()  # the buffer is empty now; step 1 is in the background's post
        assert _SlowMetrics.finished == [[1]]
    finally:
        server.shutdown()
        server.server_close()
