"""Run an ASGI app (usually Starlette) under a real uvicorn server for a test."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn


@contextmanager
def serve(app: Any, *, timeout: float = 10.0) -> Iterator[str]:
    """Serve `app` on 127.0.0.1 on a free port in a background thread.

    Args:
        app: An ASGI application.
        timeout: Seconds to wait for the server to start, and to stop.

    Yields:
        The base URL, such as ``http://127.0.0.1:41234``.
    """
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, log_level="warning", ws="none", lifespan="auto"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="http-service", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + timeout
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("the HTTP service exited before it started")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the HTTP service did not start within {timeout} s")
            time.sleep(0.005)  # polling with a deadline
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout)
        if thread.is_alive():
            raise RuntimeError(f"the HTTP service did not stop within {timeout} s")
