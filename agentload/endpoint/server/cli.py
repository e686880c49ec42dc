"""``agentload serve``: the simulated endpoint in the foreground."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Annotated

import typer
import uvicorn

from agentload.endpoint.timing.profiles import list_profiles
from agentload.errors import ConfigError

__all__ = ["register", "serve"]


def serve(
    host: str = typer.Option("127.0.0.1", help="Address to listen on."),
    port: int = typer.Option(8000, help="TCP port (0 picks a free one)."),
    profile: str = typer.Option(
        "instant", help=f"Profile name ({', '.join(list_profiles())}) or a YAML file."
    ),
    model: str = typer.Option("agentload-sim", help="Model name the server answers to."),
    seed: int = typer.Option(0, help="Seed of the simulated model's choices."),
    ssl_certfile: Annotated[
        Path | None,
        typer.Option(help="Serve HTTPS with this PEM certificate (chain); needs --ssl-keyfile."),
    ] = None,
    ssl_keyfile: Annotated[
        Path | None, typer.Option(help="PEM private key for --ssl-certfile.")
    ] = None,
    require_api_key: Annotated[
        bool,
        typer.Option(
            help="Answer /v1/ requests only with 'Authorization: Bearer KEY', KEY read from "
            "AGENTLOAD_API_KEY (else OPENAI_API_KEY), like vLLM's --api-key."
        ),
    ] = False,
) -> None:
    """Run the built-in simulated OpenAI-compatible endpoint until Ctrl-C."""
    from agentload.endpoint.server.server import ServeOptions, SimulatorServer, bind_socket

    if not 0 <= port <= 65535:
        raise ConfigError(f"--port {port}: must be 0..65535 (0 picks a free port)")
    api_key = _required_api_key() if require_api_key else None
    srv = SimulatorServer(
        profile if not Path(profile).is_file() else Path(profile),
        model,
        seed,
        serving=ServeOptions(ssl_certfile=ssl_certfile, ssl_keyfile=ssl_keyfile, api_key=api_key),
    )
    config = srv.config()  # loads the TLS files, if any, before the port is taken
    try:
        sock = bind_socket(host, port)
    except ConfigError as exc:
        raise ConfigError(f"--host {host} --port {port}: {exc}") from None
    srv.host, srv.port = host, sock.getsockname()[1]
    p = srv.simulator.profile
    typer.echo(
        f"agentload simulator on {srv.base_url}  model={model}  profile={p.name}  seed={seed}"
        + ("  api key required" if api_key else "")
        + "  (Ctrl-C stops)"
    )
    _serve_until_stopped(config, sock)


def _required_api_key() -> str:
    """The key ``--require-api-key`` makes clients send, read from the environment."""
    from agentload.auth import API_KEY_ENV, api_key_from_env

    api_key = api_key_from_env()
    if api_key is None:
        raise ConfigError(
            f"--require-api-key: set {' or '.join(API_KEY_ENV)} to the key clients must send"
        )
    return api_key


def _serve_until_stopped(config: uvicorn.Config, sock: socket.socket) -> None:
    """Serve on the bound ``sock`` in the foreground until Ctrl-C, then close it."""
    server = uvicorn.Server(config)
    try:
        asyncio.run(server.serve(sockets=[sock]))
    except KeyboardInterrupt:  # a second Ctrl-C during shutdown
        pass
    finally:
        sock.close()


def register(app: typer.Typer) -> None:
    """Add ``serve`` to the ``agentload`` command."""
    app.command("serve")(serve)
