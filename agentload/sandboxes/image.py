"""The offline sandbox image: no registry needed, built from the host's own Python.

The image itself is a tiny root filesystem (``/etc/passwd``, the dynamic linker cache, the
merged-``/usr`` symlinks, empty ``/tmp`` and ``/workspace``) imported with ``docker import``. At run
time the sandbox bind-mounts, read-only, the host directories named in the image's
``agentload.mounts`` label: ``/usr`` (``sh``, ``timeout``, the C libraries), any of ``/bin``,
``/lib``, ``/lib64``, ``/sbin`` that are real directories, and the interpreter prefix
(``sys.base_prefix``, e.g. ``/root/.pyenv/versions/3.11.7``) with its standard library and
``test`` package. Nothing else of the host is visible. An image without those labels (any image
the user names, e.g. ``python:3.12-slim``) is used as it is, without host mounts.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import platform
import re
import sys
import tarfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from docker.errors import DockerException, ImageNotFound

from agentload.errors import ConfigError, SandboxError

__all__ = [
    "IMAGE_LABEL",
    "ImageInfo",
    "build_image",
    "check_image_tag",
    "default_image_tag",
    "ensure_image",
    "host_mounts",
    "image_info",
    "image_path",
    "missing_image",
]

IMAGE_LABEL = "agentload.image"
_MOUNTS_LABEL = "agentload.mounts"
_PREFIX_LABEL = "agentload.base_prefix"
_TOP_DIRS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")


@dataclass(frozen=True)
class ImageInfo:
    """An image a sandbox can run: its tag and the host paths it needs mounted read-only."""

    tag: str
    mounts: tuple[str, ...]
    built_here: bool
    python_prefix: str | None = None


_DOMAIN = r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]+)?/)?"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_IMAGE_TAG = re.compile(
    rf"{_DOMAIN}{_COMPONENT}(?:/{_COMPONENT})*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{{0,127}})?"
)
"""Docker's image reference grammar (``[HOST[:PORT]/]NAME[:TAG]``), digests left out."""


def check_image_tag(tag: str, option: str = "--tag") -> str:
    """``tag`` when Docker accepts it as an image name; one ``ConfigError`` line saying the rule
    otherwise (before any daemon is contacted)."""
    if len(tag) > 255 or _IMAGE_TAG.fullmatch(tag) is None:
        raise ConfigError(
            f"{option} {tag!r}: not a Docker image name: [HOST[:PORT]/]NAME[:TAG], NAME in "
            "lowercase letters, digits and . _ - separators (parts joined by /), TAG of "
            "letters, digits, _ . - (not starting with . or -); at most 255 characters"
        )
    return tag


def default_image_tag() -> str:
    """``agentload-sandbox:py3.11.7``: one image per host Python version."""
    return f"agentload-sandbox:py{platform.python_version()}"


def _python_prefix() -> Path:
    return Path(os.path.realpath(sys.base_prefix))


def _host_mounts() -> tuple[list[str], list[tuple[str, str]]]:
    """(directories to bind read-only, top-level symlinks to recreate) for this host."""
    mounts, links = ["/usr"], []
    for name in _TOP_DIRS:
        p = Path("/") / name
        if p.is_symlink():
            links.append((name, os.readlink(p)))
        elif p.is_dir():
            mounts.append(str(p))
    prefix = _python_prefix()
    if not any(prefix == Path(m) or Path(m) in prefix.parents for m in mounts):
        mounts.append(str(prefix))
    return mounts, links


def host_mounts() -> list[str]:
    """The host directories the offline image is run with, read-only at the same paths."""
    return _host_mounts()[0]


def image_path() -> str:
    """The offline image's ``PATH``."""
    prefix = _python_prefix()
    return ":".join(dict.fromkeys([str(prefix / "bin"), "/usr/local/bin", "/usr/bin", "/bin"]))


def _rootfs(links: list[tuple[str, str]]) -> bytes:
    buf = io.BytesIO()
    now = int(time.time())

    def add(name: str, kind: bytes, mode: int, data: bytes = b"", link: str = "") -> None:
        info = tarfile.TarInfo(name)
        info.type, info.mode, info.mtime, info.linkname = kind, mode, now, link
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data) if data else None)

    with tarfile.open(fileobj=buf, mode="w") as tar:
        for d, mode in (("etc", 0o755), ("tmp", 0o1777), ("workspace", 0o755)):
            add(d, tarfile.DIRTYPE, mode)
        for name, target in links:
            add(name, tarfile.SYMTYPE, 0o777, link=target)
        add(
            "etc/passwd",
            tarfile.REGTYPE,
            0o644,
            b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/tmp:/bin/sh\n",
        )
        add("etc/group", tarfile.REGTYPE, 0o644, b"root:x:0:\nnogroup:x:65534:\n")
        cache = Path("/etc/ld.so.cache")
        if cache.is_file():
            add("etc/ld.so.cache", tarfile.REGTYPE, 0o644, cache.read_bytes())
    return buf.getvalue()


def image_info(client: Any, tag: str) -> ImageInfo | None:
    """What a sandbox needs to know about image ``tag``; ``None`` when it is not here."""
    try:
        image = client.images.get(tag)
    except ImageNotFound:
        return None
    labels = image.labels or {}
    mounts = tuple(json.loads(labels.get(_MOUNTS_LABEL, "[]")))
    prefix = labels.get(_PREFIX_LABEL)
    return ImageInfo(tag=tag, mounts=mounts, built_here=IMAGE_LABEL in labels, python_prefix=prefix)


def build_image(
    client: Any, tag: str | None = None, progress: Callable[[str], None] | None = None
) -> ImageInfo:
    """Build (or rebuild) the offline image and check that its Python runs; returns its info."""
    say = progress or (lambda _msg: None)
    tag = tag or default_image_tag()
    prefix = _python_prefix()
    python = prefix / "bin" / "python3"
    if not python.is_file():
        raise SandboxError(f"cannot build {tag}: no python3 in {prefix}/bin")
    mounts, links = _host_mounts()
    say(f"building {tag}: root filesystem (host Python {prefix}, mounts {', '.join(mounts)})")
    rootfs = _rootfs(links)
    path = image_path()
    changes = [
        f"ENV PATH={path}",
        "ENV LANG=C.UTF-8",
        "ENV HOME=/tmp",
        "WORKDIR /workspace",
        'CMD ["sleep", "infinity"]',
        f"LABEL {IMAGE_LABEL}=1",
        f"LABEL {_PREFIX_LABEL}={json.dumps(str(prefix))}",
        f"LABEL {_MOUNTS_LABEL}={json.dumps(json.dumps(mounts))}",
    ]
    repo, _, version = tag.rpartition(":")
    if not repo or "/" in version:
        repo, version = tag, "latest"
    say(f"building {tag}: docker import ({len(rootfs) // 1024} KiB)")
    old = image_id(client, tag)
    try:
        client.api.import_image_from_data(rootfs, repository=repo, tag=version, changes=changes)
    except DockerException as exc:
        raise SandboxError(f"cannot build {tag}: docker import failed: {exc}") from None
    info = image_info(client, tag)
    if info is None:
        raise SandboxError(f"cannot build {tag}: the image is missing after docker import")
    say(f"building {tag}: checking python3, sh and timeout inside")
    _verify(client, info)
    if old is not None and old != image_id(client, tag):
        with contextlib.suppress(DockerException):  # still used by a container: keep it
            client.images.remove(old)
    say(f"built {tag}")
    return info


def image_id(client: Any, tag: str) -> str | None:
    """The id of image ``tag``, or ``None``."""
    try:
        return str(client.images.get(tag).id)
    except ImageNotFound:
        return None


def _verify(client: Any, info: ImageInfo) -> None:
    volumes = {m: {"bind": m, "mode": "ro"} for m in info.mounts}
    probe = "import sys, json, encodings; print(sys.version.split()[0])"
    try:
        out = client.containers.run(
            info.tag,
            ["sh", "-c", f'timeout 30 python3 -c "{probe}"'],
            volumes=volumes,
            network_mode="none",
            user="65534:65534",
            remove=True,
            stdout=True,
            stderr=True,
        )
    except DockerException as exc:
        raise SandboxError(f"image {info.tag} does not run python3: {exc}") from None
    if platform.python_version() not in out.decode(errors="replace"):
        raise SandboxError(f"image {info.tag}: unexpected python3 output {out[:200]!r}")


_build_lock = threading.Lock()


def missing_image(tag: str) -> SandboxError:
    """The error for a named image this Docker host does not hold."""
    return SandboxError(
        f"image {tag} is not on this Docker host (no registry is assumed: "
        "build or load it first; `agentload sandbox build` makes the offline image)"
    )


def ensure_image(
    client: Any, tag: str | None = None, progress: Callable[[str], None] | None = None
) -> ImageInfo:
    """The image to run: a named one as it is; the offline image, built on first use (once,
    even when many sessions start together)."""
    with _build_lock:
        return _ensure(client, tag, progress)


def _ensure(client: Any, tag: str | None, progress: Callable[[str], None] | None) -> ImageInfo:
    if tag is not None:
        info = image_info(client, tag)
        if info is None:
            raise missing_image(tag)
        if not info.built_here:
            return info
        if info.mounts and all(Path(m).exists() for m in info.mounts):
            return info
        return build_image(client, tag, progress)
    tag = default_image_tag()
    info = image_info(client, tag)
    if info is not None and info.built_here and info.python_prefix == str(_python_prefix()):
        return info
    return build_image(client, tag, progress)
