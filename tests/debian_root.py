"""A fresh Debian host for docs/operations.md (tests/test_operations_doc.py): the image test's
Debian base (tests/image.py: mmdebstrap, cached, imported once) plus what an operator's host
has besides Python — the sqlite3 and PostgreSQL client tools and curl — as one more cached
layer. Each run is a new working container of it (`buildah from`), its commands run with
`buildah run` (chroot isolation: this host's network, so loopback servers are reachable and
the container's servers are on this host's loopback), and removed at the end.

The guide's `pip install --require-hashes` runs in it as written. pip there finds the lockfiles'
wheels in a wheelhouse made on this host (`pip download` of the same hashed lockfiles, cached by
their hashes) through pip's own environment (PIP_NO_INDEX, PIP_FIND_LINKS): as an operator
behind a mirror configures pip, without a word of the guide changed, and without each run
downloading ~60 MB again.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from tests import image

# An operator's host tools the guide uses beyond Python (bookworm's PostgreSQL client, 15,
# dumps servers up to 15: a newer server needs its own client).
HOST_PACKAGES = ("sqlite3", "postgresql-client", "curl")
HOST_REPO = "localhost/cluster-bot-test-host"
LOCKFILES = ("requirements/runtime.txt", "requirements/build.txt")


def host_image() -> str:
    """The base plus HOST_PACKAGES, committed once (cached in the local image store)."""
    base = image.base_image()
    key = hashlib.sha256(f"{base} {' '.join(HOST_PACKAGES)}".encode()).hexdigest()[:12]
    tag = f"{HOST_REPO}:{key}"
    with image._locked(image.cache_dir() / f"host-{key}.lock"):
        if subprocess.run(["podman", "image", "exists", tag], check=False).returncode == 0:
            return tag
        name = f"cluster-bot-host-{uuid.uuid4().hex[:10]}"
        image._run(["buildah", "from", "--pull-never", "--name", name, base], timeout=120)
        try:
            image._run(["buildah", "run", "--isolation", "chroot", name, "--", "sh", "-ec",
                        "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install"
                        " -y -qq --no-install-recommends " + " ".join(HOST_PACKAGES)
                        + " >/dev/null && apt-get clean && rm -rf /var/lib/apt/lists/*"],
                       timeout=900)
            image._run(["buildah", "commit", "--quiet", "--rm", name, tag], timeout=300)
        except BaseException:
            subprocess.run(["buildah", "rm", name], capture_output=True, check=False)
            raise
    return tag


def wheelhouse() -> Path:
    """Every wheel the lockfiles name (binary only, hashes checked), downloaded on this host."""
    digest = hashlib.sha256()
    for name in LOCKFILES:
        digest.update((image.REPO / name).read_bytes())
    path = image.cache_dir() / f"wheels-{digest.hexdigest()[:12]}"
    with image._locked(path.with_suffix(".lock")):
        if not path.is_dir():
            partial = path.with_name(path.name + ".partial")
            image._run([sys.executable, "-m", "pip", "download", "--quiet", "--require-hashes",
                        "--no-deps", "--only-binary=:all:", "--dest", str(partial),
                        *[arg for name in LOCKFILES for arg in ("-r", str(image.REPO / name))]],
                       timeout=900)
            partial.replace(path)
    return path


class Host:
    """A working container of host_image(): a fresh root per test, removed by close()."""

    def __init__(self) -> None:
        self.name = f"cluster-bot-guide-{uuid.uuid4().hex[:10]}"
        image._run(["buildah", "from", "--pull-never", "--name", self.name, host_image()],
                   timeout=120)

    def argv(self, script: str, *, env: Mapping[str, str], volumes: Sequence[str],
             cwd: str) -> list[str]:
        """bash running `script` in the root, in `cwd`, with `env` and bind mounts."""
        return ["buildah", "run", "--isolation", "chroot", f"--workingdir={cwd}",
                *[f"--env={key}={value}" for key, value in env.items()],
                *[f"--volume={volume}" for volume in volumes], self.name, "--",
                "bash", "-c", script]

    def close(self) -> None:
        subprocess.run(["buildah", "rm", self.name], capture_output=True, check=False)
