"""Secrets as files, the way deploy/ says: created exactly as deploy/compose.yaml's header says,
each is readable by the image's user (uid 10001) and no one else; DATABASE_URL (it carries the
database password) is a file too — a Compose secret, a key of the Kubernetes Secret mounted as a
file, a systemd credential. The bot reading such files as uid 10001 inside the image:
tests/test_image.py. Before: the header said root-owned, mode 0600 — `SLACK_BOT_TOKEN_FILE: …
Permission denied`, exit 2, and the stack never started."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml

from tests.test_deploy import DEPLOY, K8S, compose, unit_settings

IMAGE_UID = 10001


def header_commands() -> list[str]:
    """The shell commands in compose.yaml's header (`#   command`, before the first key)."""
    header = (DEPLOY / "compose.yaml").read_text().split("\nname:", 1)[0]
    return [line[4:].split("  #", 1)[0].rstrip() for line in header.splitlines()
            if re.match(r"#   (umask|mkdir|printf|chown|chmod|install)\b", line)]


def as_uid(uid: int, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                           *argv], capture_output=True, text=True, timeout=30, check=False)


def make_secrets_as_documented(directory: Path, values: dict[str, str] | None = None) -> Path:
    """deploy/'s header commands, as root in `directory` (the printf line for every secret the
    file lists, `value-of-<name>` unless `values` says); returns the secrets directory."""
    directory.mkdir(parents=True, exist_ok=True)
    names = list(compose()["secrets"])
    given = {name: f"value-of-{name}" for name in names} | (values or {})
    script = []
    for command in header_commands():
        if command.startswith("printf"):
            script += [f"printf '%s' '{given[name]}' > secrets/{name}" for name in names]
        else:
            script.append(command)
    subprocess.run(["sh", "-ec", "\n".join(script)], cwd=directory, check=True, timeout=30)
    return directory / "secrets"


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root and setpriv to act as another user")
def test_the_documented_secret_files_are_readable_as_the_image_user_alone(tmp_path):
    secrets = make_secrets_as_documented(tmp_path)
    assert header_commands(), "compose.yaml's header shows the commands"
    assert {f.name for f in secrets.iterdir()} == set(compose()["secrets"])
    # /run/secrets as Compose makes it: each file itself mounted (here: hard-linked, the same
    # inode, owner and mode) in a directory anyone may pass through.
    run_secrets = Path(tempfile.mkdtemp(prefix="run-secrets-", dir="/tmp"))
    try:
        run_secrets.chmod(0o755)
        for path in secrets.iterdir():
            os.link(path, run_secrets / path.name)
        check_each_readable_by_the_image_user_alone(sorted(run_secrets.iterdir()))
    finally:
        shutil.rmtree(run_secrets)


def check_each_readable_by_the_image_user_alone(files: list[Path]) -> None:
    for path in files:
        mode = path.stat().st_mode & 0o777
        assert mode & 0o077 == 0, (path.name, oct(mode))
        read = as_uid(IMAGE_UID, "cat", str(path))
        assert (read.returncode, read.stdout) == (0, f"value-of-{path.name}"), read.stderr
        assert as_uid(IMAGE_UID + 1, "cat", str(path)).returncode != 0  # nobody else


def test_database_url_is_a_file_everywhere():
    # Compose: a secret file.
    for service in ("migrate", "bot"):
        env = compose()["services"][service]["environment"]
        assert env["DATABASE_URL_FILE"] == "/run/secrets/database_url" and "DATABASE_URL" not in env
    # Kubernetes: a key of the Secret, mounted as a file for the bot and the init container
    # that migrates alike — not an environment variable (a secretKeyRef lands in
    # /proc/<pid>/environ).
    docs = {doc["kind"]: doc for path in K8S.glob("*.yaml") if path.name != "kustomization.yaml"
            for doc in yaml.safe_load_all(path.read_text()) if doc and "kind" in doc}
    pod = docs["Deployment"]["spec"]["template"]["spec"]
    assert pod["securityContext"]["fsGroup"] == IMAGE_UID  # 0400 + fsGroup: 0440
    [volume] = [v for v in pod["volumes"] if "secret" in v]
    items = {i["key"]: i["path"] for i in volume["secret"]["items"]}
    assert items["database-url"] == "DATABASE_URL"
    for container in pod["containers"] + pod["initContainers"]:
        name = container["name"]
        assert not [e for e in container.get("env", []) if e["name"] == "DATABASE_URL"], name
        [mount] = [m for m in container["volumeMounts"] if m["name"] == volume["name"]]
        env = {e["name"]: e.get("value") for e in container.get("env", [])}
        secrets_dir = docs["ConfigMap"]["data"]["SECRETS_DIR"] if "envFrom" in container else None
        assert (secrets_dir == mount["mountPath"] or
                env.get("DATABASE_URL_FILE") == f"{mount['mountPath']}/DATABASE_URL"), name
    # systemd: a credential (SECRETS_DIR=%d), SQLite in the state directory without its file.
    unit = unit_settings()
    assert "DATABASE_URL:/etc/cluster-bot/secrets/DATABASE_URL" in unit["LoadCredential"]
    assert unit["SetCredential"] == ["DATABASE_URL:sqlite:///cluster-bot.db"]
