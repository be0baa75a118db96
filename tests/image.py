"""The repository's Dockerfile, built and run on this host (tests/test_image.py).

Registries' base images can't be pulled from every machine that runs the suite, so the base is
made here from Debian packages (mmdebstrap) and handed to the Dockerfile through its BASE build
argument. buildah builds (chroot isolation: no daemon, no nested namespaces) and `buildah run`
starts the image's own entrypoint; chroot isolation shares this host's network and process
table, so the container serves on the host's loopback and its process can be signalled here,
as an engine would signal a container's main process (`podman run` can't start containers on
every host: crun may not set RLIMIT_NOFILE/NPROC inside another container).

The base (a ~220 MB tar, about a minute to make) is cached under $XDG_CACHE_HOME, keyed by the
Debian suite and the package list, and imported once into the local image store; buildah's
layer cache keeps the dependency layers, so a repeated run rebuilds only the product's layer.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
TOOLS = ("mmdebstrap", "podman", "buildah")
SUITE = "bookworm"  # Python 3.11, the product's
# What python:3.11-slim-bookworm offers the Dockerfile: the interpreter, its venv module and
# useradd. Nothing else: a compiler or pip reaching the final stage would have to come from
# the Dockerfile, and the test would see it.
BASE_PACKAGES = ("python3", "python3-venv", "passwd")
BASE_REPO = "localhost/cluster-bot-test-base"
IMAGE = "localhost/cluster-bot-test:latest"
BUILDER = "localhost/cluster-bot-test-builder:latest"
BUILD_TIMEOUT = 20 * 60.0  # a cold build downloads ~60 MB of wheels
CA_IN_BUILD = "/etc/ssl/host-ca.crt"


def unavailable() -> str | None:
    """Why the image can't be built on this machine, or None."""
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        return (f"{', '.join(missing)} not installed (apt-get install mmdebstrap podman "
                f"buildah; .ci/run does)")
    if os.geteuid() != 0:
        return "mmdebstrap and buildah need root here (no rootless set-up)"
    return None


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    path = Path(base) / "cluster-bot-tests"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _run(argv: Sequence[str], *, timeout: float) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                          check=False)
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(argv[:3])} … exited {done.returncode}:\n"
                             f"{(done.stdout + done.stderr)[-4000:]}")
    return done


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One maker at a time per cache entry (two test runs on one machine share the cache)."""
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def base_image() -> str:
    """The local Debian base, made (or found in the cache) and imported; its tag."""
    key = hashlib.sha256(f"{SUITE} minbase {' '.join(BASE_PACKAGES)}".encode()).hexdigest()[:12]
    tag = f"{BASE_REPO}:{key}"
    cache = cache_dir()
    with _locked(cache / f"base-{key}.lock"):
        if subprocess.run(["podman", "image", "exists", tag], check=False).returncode == 0:
            return tag
        tar = cache / f"base-{key}.tar"
        if not tar.exists():
            partial = tar.with_suffix(".partial.tar")
            _run(["mmdebstrap", "--quiet", "--variant=minbase",
                  f"--include={','.join(BASE_PACKAGES)}", SUITE, str(partial)], timeout=900)
            partial.replace(tar)  # a killed run leaves no half-made base behind for the next
        _run(["podman", "import", "--quiet", str(tar), tag], timeout=300)
    return tag


def _ca_bundle() -> Path | None:
    """The CA bundle this host trusts: pip in the build trusts it too (a TLS-inspecting proxy)."""
    for candidate in (os.environ.get("PIP_CERT"), os.environ.get("SSL_CERT_FILE"),
                      "/etc/ssl/certs/ca-certificates.crt"):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


def release_args() -> list[str]:
    """`make image`'s arguments (the Makefile's IMAGE_ARGS: the version, the commit, the source,
    the build time as build arguments, then `--tag cluster-bot:<version>`)."""
    out = _run(["make", "-s", "--no-print-directory", "-C", str(REPO), "image-args"], timeout=60)
    return out.stdout.split()


def build(workdir: Path, made: Sequence[str]) -> str:
    """`buildah bud` of the repository's Dockerfile on the local base; the image's tag.

    Layers are kept for the next run (the dependencies' downloads above all); the images an
    earlier build tagged are removed once the new ones have their tags, so repeated runs with
    changed code don't pile up a venv each."""
    # --format docker: OCI image configs have no HEALTHCHECK; --force-rm: a failed build leaves
    # no working container behind.
    argv = ["buildah", "bud", "--isolation", "chroot", "--layers", "--force-rm",
            "--format", "docker", "--build-arg", f"BASE={base_image()}"]
    argv += made[:made.index("--tag")]  # release_args(): as `make image`, under our own tag
    ca = _ca_bundle()
    if ca is not None:
        # Mounted for the RUN steps only: volumes are not layers, nothing of this host's
        # trust store or pip settings stays in the image.
        conf = workdir / "pip.conf"
        conf.write_text(f"[global]\ncert = {CA_IN_BUILD}\n")
        argv += ["--volume", f"{conf}:/etc/pip.conf:ro", "--volume", f"{ca}:{CA_IN_BUILD}:ro"]
    earlier = {tag: _image_id(tag) for tag in (BUILDER, IMAGE)}
    # The builder stage tagged too (its layers come from the cache in the second build): its
    # layers are then an image's, not dangling ones a clean-up would take.
    _run([*argv, "--target", "builder", "--tag", BUILDER, str(REPO)], timeout=BUILD_TIMEOUT)
    _run([*argv, "--tag", IMAGE, str(REPO)], timeout=BUILD_TIMEOUT)
    for tag, was in earlier.items():
        if was is not None and was != _image_id(tag):
            subprocess.run(["podman", "rmi", was], capture_output=True, check=False)
    return IMAGE


def _image_id(tag: str) -> str | None:
    done = subprocess.run(["podman", "image", "inspect", "--format", "{{.Id}}", tag],
                          capture_output=True, text=True, check=False)
    return done.stdout.strip() if done.returncode == 0 else None


def config(image: str) -> dict[str, Any]:
    """The image's run configuration (Docker format: Entrypoint, Cmd, User, Healthcheck …)."""
    out = _run(["buildah", "inspect", "--type", "image", image], timeout=60).stdout
    found: dict[str, Any] = json.loads(out)["Docker"]["config"]
    return found


def size_bytes(image: str) -> int:
    out = _run(["podman", "image", "inspect", "--format", "{{.Size}}", image], timeout=60)
    return int(out.stdout.strip())


class Containers:
    """Working containers of an image, removed on exit."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def new(self, image: str) -> str:
        name = f"cluster-bot-test-{uuid.uuid4().hex[:10]}"
        _run(["buildah", "from", "--pull-never", "--name", name, image], timeout=120)
        self.names.append(name)
        return name

    def remove_all(self) -> None:
        for name in self.names:
            subprocess.run(["buildah", "rm", name], capture_output=True, check=False)


def run_argv(container: str, argv: Sequence[str], env: Mapping[str, str] = {},
             volumes: Sequence[str] = ()) -> list[str]:
    """`buildah run` of `argv` in `container` with the image's env plus `env` (and bind
    mounts, `host:container[:options]`)."""
    return ["buildah", "run", "--isolation", "chroot",
            *[f"--env={key}={value}" for key, value in env.items()],
            *[f"--volume={volume}" for volume in volumes], container, "--", *argv]


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    return children


def main_process(runner_pid: int) -> int | None:
    """The container's own process under `buildah run` (pid `runner_pid`): the descendant that
    is not buildah's (buildah's chroot runtime and exec wrappers kill it outright when they
    are signalled themselves; an engine signals the container's process)."""
    children = _children()
    todo = list(children.get(runner_pid, []))
    while todo:  # breadth first: the topmost process that is not buildah's
        pid = todo.pop(0)
        try:
            first = (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")[0]
        except OSError:
            continue
        if b"buildah" not in first:
            return pid
        todo += children.get(pid, [])
    return None


def uid_of(pid: int) -> int:
    for line in (Path("/proc") / str(pid) / "status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    raise AssertionError(f"no Uid line for pid {pid}")
