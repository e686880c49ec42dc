"""The Docker sandbox of an agent product: its only way out is the recording proxy.

The container has no network (only its loopback); ``forward.py`` pipes 127.0.0.1:8100 inside to
the proxy's Unix socket mounted from the host. A probe run as the agent would be checks that
the proxy answers there, and that nothing else does: the host's addresses (where a server
listens on every interface), the host's loopback, DNS."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentload.products.session import _Route
from agentload.sandboxes import open_sandbox
from agentload.scenarios.models import SandboxSpec

PROBE = r"""
import json, os, socket, sys, urllib.request
out = {"interfaces": sorted(os.listdir("/sys/class/net"))}
with urllib.request.urlopen("http://127.0.0.1:8100/v1/models", timeout=10) as r:
    out["proxy"] = [m["id"] for m in json.load(r)["data"]]
def reach(host, port):
    s = socket.socket()
    s.settimeout(3)
    try:
        s.connect((host, port))
        return "connected"
    except OSError as exc:
        return type(exc).__name__
    finally:
        s.close()
out["hosts"] = {h: reach(h, int(sys.argv[2])) for h in sys.argv[1].split(",")}
try:
    socket.getaddrinfo("pypi.org", 443)
    out["dns"] = "resolved"
except OSError as exc:
    out["dns"] = type(exc).__name__
print("PROBE " + json.dumps(out))
"""


@pytest.fixture
def host_server() -> Iterator[int]:
    """A TCP server on every interface of the host that accepts and answers one byte."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", 0))
    srv.listen(16)
    srv.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            conn.sendall(b"x")
            conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield srv.getsockname()[1]
    stop.set()
    t.join(5)
    srv.close()


def _host_addresses(docker_client: Any) -> list[str]:
    """The host's addresses a container could try: its interfaces' and the Docker bridge's."""
    found = {socket.gethostbyname(socket.gethostname())}
    with open("/proc/net/fib_trie") as f:  # every local address of the host
        lines = f.read().splitlines()
    for i, line in enumerate(lines):
        if "/32 host LOCAL" in line and i > 0:
            found.add(lines[i - 1].split()[-1])
    for net in docker_client.networks.list(names=["bridge"]):
        for cfg in net.attrs.get("IPAM", {}).get("Config") or ():
            if cfg.get("Gateway"):
                found.add(cfg["Gateway"])
    return sorted(a for a in found if not a.startswith("127."))


def test_the_only_way_out_of_a_product_sandbox_is_the_proxy(
    docker_client: Any, proxy: Any, host_server: int, tmp_path: Path
) -> None:
    addresses = _host_addresses(docker_client)
    assert addresses, "the host has no non-loopback address to try"
    for a in addresses:  # the host server does answer on each of them, from the host
        with socket.create_connection((a, host_server), timeout=3) as s:
            assert s.recv(1) == b"x"
    ws = tmp_path / "ws"
    ws.mkdir()
    route = _Route(tmp_path / "route", docker=True)
    route.close_listener = asyncio.run(proxy.listen(route.sock, "probe"))
    try:
        with open_sandbox("docker", ws, SandboxSpec(), "route-test", mounts=route.mounts()) as sb:
            argv = ["python3", "-c", PROBE, ",".join([*addresses, "127.0.0.1"]), str(host_server)]
            res = sb.exec(route.wrap(argv), timeout_s=60)
    finally:
        route.close()
    text = res.output.decode()
    assert res.exit_code == 0, text
    got = json.loads(text.split("PROBE ", 1)[1].splitlines()[0])
    assert got["interfaces"] == ["lo"], got
    assert got["proxy"] == ["agentload-sim"], got  # the simulator, through the proxy
    assert all(v != "connected" for v in got["hosts"].values()), got
    assert set(got["hosts"]) == {*addresses, "127.0.0.1"}
    assert got["dns"] != "resolved", got
