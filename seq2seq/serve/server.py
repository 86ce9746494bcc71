"""The HTTP server under the service: uvicorn, with a deadline for every request's headers.

uvicorn closes a keep-alive connection that stays silent for `timeout_keep_alive` seconds,
but once a client has sent one byte of a request it waits for the rest of the headers for
ever, so clients that never finish their headers (slowloris) would hold their connections
open indefinitely. `HeaderDeadlineProtocol` is uvicorn's h11 protocol with one addition:
from the moment a connection opens, and again after each answer, the client has
`read_timeout_s` seconds to send a request's complete headers; then the connection is
closed (one INFO line when part of a request had come, DEBUG for a silent one). The body has the same time again, counted by the application
(`seq2seq.serve.app.read_body`, 408). uvicorn's h11 limit on incomplete headers (16 KiB)
answers longer ones 400.

`server_config` is the configuration `seq2seq-serve` runs (tests run the same one).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from seq2seq.serve.limits import Limits

log = logging.getLogger(__name__)
KEEP_ALIVE_S = 5  # an idle connection between requests is closed after this


class HeaderDeadlineProtocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline for each request's headers (module docstring);
    the deadline is the class's `header_timeout_s` (`header_deadline_protocol`)."""

    header_timeout_s: float = 10.0
    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header_deadline()

    def handle_events(self) -> None:
        before = self.cycle
        super().handle_events()
        if self.cycle is not before:  # a request's headers are complete
            self._disarm_header_deadline()

    def on_response_complete(self) -> None:
        self._arm_header_deadline()  # the next request's; disarmed again if it is pipelined
        super().on_response_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_deadline()
        super().connection_lost(exc)

    def _arm_header_deadline(self) -> None:
        self._disarm_header_deadline()
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._headers_late)

    def _disarm_header_deadline(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_late(self) -> None:
        self._header_timer = None
        if self.transport.is_closing():
            return
        client = "a client" if self.client is None else f"client {self.client[0]}:{self.client[1]}"
        partial = bool(self.conn.trailing_data[0])  # a request begun; else a silent connection
        log.log(logging.INFO if partial else logging.DEBUG,
                "%s sent no complete request headers within %g s; closed",
                client, self.header_timeout_s)  # fmt: skip
        self.transport.close()


def header_deadline_protocol(seconds: float) -> type[HeaderDeadlineProtocol]:
    """The protocol class whose clients have `seconds` for each request's headers."""
    return type("HeaderDeadlineProtocol", (HeaderDeadlineProtocol,), {"header_timeout_s": seconds})


def server_config(app: Any, host: str, port: int, limits: Limits, access_log: bool = False,
                  **options: Any) -> uvicorn.Config:  # fmt: skip
    """uvicorn's configuration for the service `app` on host:port; `options` go to
    `uvicorn.Config` as they are (a test passes `log_config=None`)."""
    return uvicorn.Config(
        app, host=host, port=port, http=header_deadline_protocol(limits.read_timeout_s),
        ws="none", lifespan="on", access_log=access_log, log_level="info",
        timeout_keep_alive=KEEP_ALIVE_S, timeout_graceful_shutdown=5, **options,
    )  # fmt: skip
