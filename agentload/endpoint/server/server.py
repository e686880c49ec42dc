"""``SimulatorServer``: the simulated endpoint on uvicorn, in a background thread or in front.

    with SimulatorServer(profile="instant", model="agentload-sim", seed=0) as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="x")

Address, TLS and API key come in one ``ServeOptions``:
``SimulatorServer("instant", serving=ServeOptions(api_key="k"))``.

The socket is bound before the thread starts (port 0 picks a free port), so ``.port`` and
``.base_url`` are valid as soon as ``start()`` returns, and ``start()`` returns only once the
server accepts requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import uvicorn

from agentload.endpoint.policy.types import PolicyConfig
from agentload.endpoint.server.app import Simulator, build_app
from agentload.endpoint.timing.profiles import Profile
from agentload.errors import ConfigError, EndpointError

__all__ = ["ServeOptions", "SimulatorServer", "bind_socket"]


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket; ``ConfigError`` when the address is taken or invalid."""
    sock: socket.socket | None = None
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        family = infos[0][0]
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Accepted sockets inherit it: no Nagle delay between a response's small writes.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except (OSError, OverflowError) as exc:
        if sock is not None:
            sock.close()
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise ConfigError(f"cannot listen on {host}:{port}: {why}") from None
    sock.setblocking(False)
    return sock


@dataclass(frozen=True)
class ServeOptions:
    """Where and how a ``SimulatorServer`` listens: address, TLS files, the API key it requires.

    Checked when made: TLS needs both files and both must exist; an API key, when given, is not
    empty (``ConfigError`` otherwise).
    """

    host: str = "127.0.0.1"
    port: int = 0
    ssl_certfile: str | os.PathLike[str] | None = None
    ssl_keyfile: str | os.PathLike[str] | None = None
    api_key: str | None = None

    def __post_init__(self) -> None:
        if (self.ssl_certfile is None) != (self.ssl_keyfile is None):
            raise ConfigError("serving TLS needs both a certificate file and a key file")
        for what, f in (("certificate", self.ssl_certfile), ("key", self.ssl_keyfile)):
            if f is not None and not Path(f).is_file():
                raise ConfigError(f"{f}: TLS {what} file not found")
        if self.api_key is not None and not self.api_key:
            raise ConfigError("an empty API key would accept no request; give a key or None")


class SimulatorServer:
    """The built-in simulated OpenAI-compatible endpoint, embeddable (see module docstring)."""

    def __init__(
        self,
        profile: str | os.PathLike[str] | Profile = "instant",
        model: str = "agentload-sim",
        seed: int = 0,
        *,
        policy: PolicyConfig | None = None,
        policy_overrides: Mapping[str, Any] | None = None,
        tokenizer: str = "o200k_base",
        serving: ServeOptions | None = None,
    ) -> None:
        serving = serving or ServeOptions()
        self.ssl_certfile = None if serving.ssl_certfile is None else str(serving.ssl_certfile)
        self.ssl_keyfile = None if serving.ssl_keyfile is None else str(serving.ssl_keyfile)
        self._api_key = serving.api_key
        self.simulator = Simulator(
            profile,
            model,
            seed,
            policy=policy,
            policy_overrides=policy_overrides,
            tokenizer=tokenizer,
        )
        self.model = model
        self.host = serving.host
        self._want_port = serving.port
        self.port = serving.port
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT/v1`` (``https://`` when serving TLS)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        scheme = "https" if self.ssl_certfile else "http"
        return f"{scheme}://{host}:{self.port}/v1"

    def config(self) -> uvicorn.Config:
        """The uvicorn config, loaded (a bad TLS certificate or key is a ``ConfigError``)."""
        config = uvicorn.Config(
            build_app(self.simulator, self._api_key),
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_keep_alive=60,
            timeout_graceful_shutdown=2,
            backlog=2048,
            ssl_certfile=self.ssl_certfile,
            ssl_keyfile=self.ssl_keyfile,
        )
        try:
            config.load()
        except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
            raise ConfigError(
                f"{self.ssl_certfile}: cannot load the TLS certificate and key: {exc}"
            ) from None
        return config

    def start(self, timeout_s: float = 30.0) -> SimulatorServer:
        """Start uvicorn in a daemon thread; returns when the server accepts requests."""
        if self._thread is not None:
            return self
        config = self.config()
        self._sock = bind_socket(self.host, self._want_port)
        self.port = self._sock.getsockname()[1]
        self._server = uvicorn.Server(config)
        server, sock = self._server, self._sock
        errors: list[BaseException] = []

        def run() -> None:
            try:
                asyncio.run(server.serve(sockets=[sock]))
            except BaseException as exc:  # reported to start() below
                errors.append(exc)

        self._thread = threading.Thread(target=run, name="agentload-simulator", daemon=True)
        self._thread.start()
        waited = 0.0
        while not server.started:
            if errors or not self._thread.is_alive():
                self.stop()
                raise EndpointError(f"simulator failed to start on {self.base_url}: {errors}")
            if waited > timeout_s:
                self.stop()
                raise EndpointError(f"simulator did not start within {timeout_s}s")
            threading.Event().wait(0.01)
            waited += 0.01
        return self

    def stop(self) -> None:
        """Stop serving (open streams get ``timeout_graceful_shutdown``) and join the thread."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
        self._thread = None
        self._server = None
        self._sock = None

    def __enter__(self) -> SimulatorServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"SimulatorServer({self.base_url!r}, model={self.model!r})"
