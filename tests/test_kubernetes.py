"""The Kubernetes base as kustomize renders it (issue 26 item 5): what happens between two
releases and on a locked-down cluster, beyond the schemas tests/test_deploy.py checks.

- Two releases never fight over one immutable object: rendering the base again with another
  image keeps every Job (a template is immutable) equal under its name — the schema is migrated
  by each new pod's init container under the migration lock instead.
- Only Slack's port is open to everyone; the internal port (health, metrics) to Prometheus alone.
- preStop and the grace period cover the listener's drain (LISTENER_DRAIN_SECONDS).
- matplotlib's config dir is a writable emptyDir on the read-only root.
- The policy file comes from a generated ConfigMap whose hash rolls the pods when it changes.
- The Ingress example gives Slack's paths a TLS host and nothing else.
Every rendered object validates (kubernetes-validate --strict, as tests/test_deploy.py)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.config.policy_file import load_policy
from bot.config.settings import Settings
from tests.test_deploy import IMAGE, K8S, validate

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None,
                                reason="kubectl is not installed: `kubectl kustomize` renders")
INGRESS = K8S / "examples" / "ingress.yaml"
Doc = dict[str, Any]


def render(where: Path, *, tag: str | None = None, policy: str | None = None) -> list[Doc]:
    """`kubectl kustomize` of an overlay of (a copy of) the base: another image tag, another
    policy file — as an operator's pipeline renders the next release."""
    base = where / "base"
    shutil.copytree(K8S, base, ignore=shutil.ignore_patterns("examples"))
    if policy is not None:
        (base / "policy.yaml").write_text(policy)
    overlay = where / "overlay"
    overlay.mkdir()
    images = f"images:\n  - name: cluster-bot\n    newTag: {tag}\n" if tag else ""
    (overlay / "kustomization.yaml").write_text(f"resources:\n  - ../base\n{images}")
    built = subprocess.run(["kubectl", "kustomize", str(overlay)], capture_output=True,
                           text=True, timeout=120, check=False)
    assert built.returncode == 0, built.stderr
    return [d for d in yaml.safe_load_all(built.stdout) if d]


def one(docs: list[Doc], kind: str, name: str | None = None) -> Doc:
    [found] = [d for d in docs if d["kind"] == kind
               and (name is None or d["metadata"]["name"] == name)]
    return found


def pod_of(docs: list[Doc]) -> Doc:
    spec: Doc = one(docs, "Deployment")["spec"]["template"]["spec"]
    return spec


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> list[Doc]:
    return render(tmp_path_factory.mktemp("render"))


def test_every_rendered_object_and_the_ingress_example_validate(docs):
    for doc in docs + [yaml.safe_load(INGRESS.read_text())]:
        validate(doc)


def test_a_new_release_changes_no_immutable_job_under_its_name(docs, tmp_path):
    """Before: `cluster-bot-migrate`'s template changed with the image, and `kubectl apply -k`
    of the next release failed (a Job's template is immutable)."""
    later = render(tmp_path, tag="9.9.9")
    assert pod_of(later)["containers"][0]["image"] == "cluster-bot:9.9.9"  # it did change
    jobs = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Job"}
    for job in (d for d in later if d["kind"] == "Job"):
        name = job["metadata"]["name"]
        assert name not in jobs or jobs[name]["spec"] == job["spec"], name
    # The migration goes with the release's pods: an init container of the same image, before
    # the bot, holding the migration lock (`cluster-bot migrate`; storage/db.py).
    for rendered, image in ((docs, IMAGE), (later, "cluster-bot:9.9.9")):
        [migrate] = pod_of(rendered)["initContainers"]
        assert (migrate["args"], migrate["image"]) == (["migrate"], image)


def _port_numbers(container: Doc) -> dict[str, int]:
    return {p["name"]: p["containerPort"] for p in container["ports"]}


def _allowed(policy: Doc, port: str | int) -> list[list[Doc] | None]:
    """The `from` lists of the rules that admit `port` (None: from anywhere)."""
    found = []
    for rule in policy["spec"].get("ingress", []):
        ports = rule.get("ports")
        if ports is None or any(p.get("port") in (port, None) for p in ports):
            found.append(rule.get("from"))
    return found


def test_only_the_scraper_reaches_the_internal_port_and_slack_s_port_stays_open(docs):
    pod = one(docs, "Deployment")["spec"]["template"]
    [bot] = pod["spec"]["containers"]
    ports = _port_numbers(bot)
    policies = [d for d in docs if d["kind"] == "NetworkPolicy"
                and d["spec"]["podSelector"]["matchLabels"].items()
                <= pod["metadata"]["labels"].items() and "Ingress" in d["spec"]["policyTypes"]]
    assert policies, "no NetworkPolicy isolates the bot's pods: 0.0.0.0:3001 is open to all"
    internal = [f for p in policies for by in ("internal", ports["internal"])
                for f in _allowed(p, by)]
    assert internal and None not in internal and [] not in internal, internal
    for sources in internal:  # each source: Prometheus pods
        for source in sources or []:
            assert source["podSelector"]["matchLabels"] == {
                "app.kubernetes.io/name": "prometheus"}, source
    slack = [f for p in policies for by in ("http", ports["http"]) for f in _allowed(p, by)]
    assert None in slack, "Slack's port must stay reachable from the Ingress controller"
    monitor = one(docs, "ServiceMonitor")  # what the scraper scrapes is the internal port
    service = one(docs, "Service", "cluster-bot-metrics")
    [port] = [p for p in service["spec"]["ports"]
              if p["name"] == monitor["spec"]["endpoints"][0]["port"]]
    assert port["targetPort"] == "internal"


def test_the_stop_covers_prestop_and_the_listener_drain(docs):
    pod = pod_of(docs)
    [bot] = pod["containers"]
    settings = one(docs, "ConfigMap", "cluster-bot")["data"]
    drain = int(settings.get("LISTENER_DRAIN_SECONDS",
                             Settings.model_fields["listener_drain_seconds"].default))
    command = " ".join(bot["lifecycle"]["preStop"]["exec"]["command"])
    [pre_stop] = [int(s) for s in re.findall(r"sleep\((\d+)\)", command)]
    assert pre_stop >= 5  # kube-proxy and the Ingress stop sending here meanwhile
    assert pod["terminationGracePeriodSeconds"] >= pre_stop + drain + 20  # + work in flight
    assert bot["readinessProbe"]["httpGet"]["path"] == "/readyz"  # 503 from SIGTERM on


def _mount_of(pod: Doc, container: Doc, path: str) -> tuple[Doc, Doc]:
    """The volume mount holding `path`, and its volume."""
    [mount] = [m for m in container["volumeMounts"]
               if path == m["mountPath"] or path.startswith(m["mountPath"].rstrip("/") + "/")]
    [volume] = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    return mount, volume


def test_matplotlib_writes_to_an_empty_dir_on_the_read_only_root(docs):
    pod = pod_of(docs)
    [bot] = pod["containers"]
    assert bot["securityContext"]["readOnlyRootFilesystem"] is True
    env = {e["name"]: e.get("value") for e in bot.get("env", [])}
    assert "MPLCONFIGDIR" in env, "matplotlib would warn and rebuild its font cache per chart"
    mount, volume = _mount_of(pod, bot, env["MPLCONFIGDIR"])
    assert "emptyDir" in volume and not mount.get("readOnly"), (mount, volume)


def test_the_policy_file_is_a_generated_config_map_whose_change_rolls_the_pods(docs, tmp_path):
    pod = pod_of(docs)
    [bot] = pod["containers"]
    env = {e["name"]: e.get("value") for e in bot.get("env", [])}
    mount, volume = _mount_of(pod, bot, env["POLICY_FILE"])
    name = volume["configMap"]["name"]
    policy = one(docs, "ConfigMap", name)
    assert re.fullmatch(r"cluster-bot-policy-[a-z0-9]{10}", name), name  # kustomize's hash
    file = Path(env["POLICY_FILE"]).relative_to(mount["mountPath"])
    (tmp_path / "policy.yaml").write_text(policy["data"][str(file)])
    load_policy(tmp_path / "policy.yaml")  # the bot would start with it
    edited = policy["data"][str(file)].replace("U0000000000", "U0000000001")
    later = render(tmp_path / "edited", policy=edited)
    renamed = pod_of(later)["volumes"]
    [moved] = [v for v in renamed if v["name"] == volume["name"]]
    assert moved["configMap"]["name"] != name  # a new pod template: the Deployment rolls
    assert one(later, "ConfigMap", moved["configMap"]["name"])["data"][str(file)] == edited


def test_the_ingress_example_serves_slack_s_paths_over_tls_and_nothing_internal(docs):
    ingress = yaml.safe_load(INGRESS.read_text())
    slack = one(docs, "Service", "cluster-bot")
    [port] = slack["spec"]["ports"]
    hosts = {h for tls in ingress["spec"]["tls"] for h in tls["hosts"]}
    paths = []
    for rule in ingress["spec"]["rules"]:
        assert rule["host"] in hosts, rule["host"]  # every host has its certificate
        for path in rule["http"]["paths"]:
            backend = path["backend"]["service"]
            assert backend["name"] == slack["metadata"]["name"]
            assert backend["port"] in ({"name": port["name"]}, {"number": port["port"]})
            paths.append(path["path"])
    assert "/slack/events" in paths
    assert not {"/healthz", "/readyz", "/metrics", "/"} & set(paths)
