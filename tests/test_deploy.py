"""deploy/: the compose file validates against the Compose Specification's JSON schema, every
Kubernetes manifest against the Kubernetes schemas (kubernetes-validate, strict: no unknown
field) and the Prometheus Operator's kinds against JSON schemas of its CRDs (tests/data/
prometheus-operator: made from the cloudcoil-models-prometheus-operator 0.80.1.0 models on
PyPI, which are generated from the operator's CRDs, with unknown fields refused), the kustomize base
builds (`kubectl kustomize`), and the systemd unit passes `systemd-analyze verify`. Beyond the
schemas: what the brief asks of each — probes on the internal port, secrets by reference, the
migration once before the bots, the alert rules equal to ops/alerts.yaml.

`python -m tests.test_deploy` rewrites deploy/kubernetes/prometheusrule.yaml from
ops/alerts.yaml."""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from bot.config.settings import SECRET_SETTINGS
from tests.releases import pyproject_version

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "kubernetes"
# The Compose Specification's schema as check-jsonschema 0.39.0 (PyPI) vendors it, with its
# licence (Apache-2.0) beside it: tests/data/compose-spec.LICENSE.
COMPOSE_SCHEMA = Path(__file__).parent / "data" / "compose-spec.json"
IMAGE = f"cluster-bot:{pyproject_version()}"  # `make image`'s tag: this release's
RULE_HEADER = """\
# ops/alerts.yaml as a PrometheusRule (the Prometheus Operator). Generated: keep it equal to
# ops/alerts.yaml (tests/test_deploy.py checks) — edit that file, then regenerate this one
# with `python -m tests.test_deploy` .
"""


def load_all(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


# -- compose ------------------------------------------------------------------------------------


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    return loaded


def compose_errors(doc: dict[str, Any]) -> list[str]:
    schema = json.loads(COMPOSE_SCHEMA.read_text())
    validator = jsonschema.Draft202012Validator(schema)
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in validator.iter_errors(doc)]


def test_compose_validates_against_the_compose_spec():
    assert compose_errors(compose()) == []


def test_the_compose_schema_check_can_fail():
    broken = copy.deepcopy(compose())
    broken["services"]["bot"]["depends_on"]["migrate"]["condition"] = "service_finished"
    broken["services"]["bot"]["healthcheck"]["intervall"] = "5s"
    errors = compose_errors(broken)
    assert any("service_finished" in e for e in errors), errors
    assert any("intervall" in e for e in errors), errors


def test_compose_postgres_migration_once_two_replicas_secrets_as_files():
    doc = compose()
    db, migrate, bot = (doc["services"][name] for name in ("db", "migrate", "bot"))
    assert "pg_isready" in " ".join(db["healthcheck"]["test"])
    assert migrate["image"] == bot["image"] == IMAGE
    assert migrate["command"] == ["migrate"] and migrate["restart"] == "no"
    assert migrate["depends_on"] == {"db": {"condition": "service_healthy"}}
    assert bot["command"] == ["serve"] and bot["deploy"]["replicas"] == 2
    assert bot["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}
    assert bot["depends_on"]["db"] == {"condition": "service_healthy"}
    for service in (migrate, bot):
        env = service["environment"]
        for name in SECRET_SETTINGS:
            assert name not in env, f"{name} as a plain value: use {name}_FILE"
        files = {k.removesuffix("_FILE"): v for k, v in env.items() if k.endswith("_FILE")}
        assert set(files) <= set(SECRET_SETTINGS)
        assert {"DATABASE_URL", "SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET"} <= set(files)
        for path in files.values():  # each file is a secret the service is given
            assert path.removeprefix("/run/secrets/") in service["secrets"], path
        assert service["read_only"] is True and service["cap_drop"] == ["ALL"]
    assert all(secret["file"].startswith("./secrets/") for secret in doc["secrets"].values())
    # Slack's port is published; the internal one (health, metrics) stays in the network.
    assert all(not str(p).endswith(":3001") for p in bot["ports"])
    assert "3001/readyz" in " ".join(bot["healthcheck"]["test"])


# -- Kubernetes -----------------------------------------------------------------------------


def manifests() -> dict[str, dict[str, Any]]:
    """Every manifest in the base, by kind (one of each)."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(K8S.glob("*.yaml")):
        if path.name in ("kustomization.yaml", "policy.yaml"):  # not objects: kustomize's input
            continue
        for doc in load_all(path):
            key = doc["kind"] if doc["kind"] != "Service" else doc["metadata"]["name"]
            assert key not in found, key
            found[key] = doc
    return found


OPERATOR_SCHEMAS = Path(__file__).parent / "data" / "prometheus-operator"


def validate(doc: dict[str, Any]) -> None:
    """Kubernetes' own kinds against its schemas; the operator's against its CRDs' schemas."""
    if doc["apiVersion"].startswith("monitoring.coreos.com/"):
        schema = json.loads((OPERATOR_SCHEMAS / f"{doc['kind'].lower()}.schema.json")
                            .read_text())
        jsonschema.Draft202012Validator(schema).validate(doc)
        return
    kubernetes_validate.validate(doc, kubernetes_validate.utils.latest_version(), strict=True)


def test_every_manifest_validates():
    docs = manifests()
    assert {"Deployment", "NetworkPolicy", "PodDisruptionBudget", "ServiceMonitor",
            "PrometheusRule", "ConfigMap", "ServiceAccount", "cluster-bot",
            "cluster-bot-metrics"} <= set(docs)
    for doc in docs.values():
        validate(doc)


def test_the_validation_can_fail():
    docs = manifests()
    deployment = copy.deepcopy(docs["Deployment"])
    deployment["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(deployment)
    monitor = copy.deepcopy(docs["ServiceMonitor"])
    monitor["spec"]["endpoints"][0]["scrapeIntervall"] = "30s"
    with pytest.raises(jsonschema.ValidationError, match="scrapeIntervall"):
        validate(monitor)


def test_the_deployment_probes_the_internal_port_runs_locked_down_and_refers_to_secrets():
    docs = manifests()
    deployment = docs["Deployment"]
    spec = deployment["spec"]
    assert spec["replicas"] == 2 and spec["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    pod = spec["template"]["spec"]
    [container] = pod["containers"]
    assert container["image"] == IMAGE and container["args"] == ["serve"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"http": 3000, "internal": 3001}
    probes = {kind: container[kind]["httpGet"] for kind in
              ("startupProbe", "livenessProbe", "readinessProbe")}
    assert all(p["port"] == "internal" for p in probes.values())
    assert probes["readinessProbe"]["path"] == "/readyz"
    assert probes["livenessProbe"]["path"] == "/healthz"
    assert {"requests", "limits"} <= set(container["resources"])
    assert pod["securityContext"]["runAsNonRoot"] is True
    locked = container["securityContext"]
    assert locked["readOnlyRootFilesystem"] is True
    assert locked["allowPrivilegeEscalation"] is False
    assert locked["capabilities"]["drop"] == ["ALL"]
    # A secret setting never has a literal value: a secretKeyRef, or a file from the Secret.
    for entry in container.get("env", []):
        if entry["name"] in SECRET_SETTINGS:
            assert "value" not in entry and "secretKeyRef" in entry["valueFrom"], entry
    assert not set(docs["ConfigMap"]["data"]) & set(SECRET_SETTINGS)
    [secrets] = [v for v in pod["volumes"] if "secret" in v]
    files = {item["path"] for item in secrets["secret"]["items"]}
    assert files <= set(SECRET_SETTINGS)
    [mount] = [m for m in container["volumeMounts"] if m["name"] == secrets["name"]]
    assert docs["ConfigMap"]["data"]["SECRETS_DIR"] == mount["mountPath"]
    [migrate] = pod["initContainers"]  # the schema is migrated before the bot starts
    assert migrate["args"] == ["migrate"] and migrate["image"] == IMAGE


def test_services_pdb_and_monitoring_fit_together():
    docs = manifests()
    pods = docs["Deployment"]["spec"]["template"]["metadata"]["labels"]

    def selects(selector: dict[str, str]) -> bool:
        return selector.items() <= pods.items()

    slack, metrics = docs["cluster-bot"], docs["cluster-bot-metrics"]
    assert selects(slack["spec"]["selector"]) and selects(metrics["spec"]["selector"])
    assert [p["targetPort"] for p in slack["spec"]["ports"]] == ["http"]
    assert [p["targetPort"] for p in metrics["spec"]["ports"]] == ["internal"]
    assert selects(docs["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"])
    monitor = docs["ServiceMonitor"]["spec"]
    assert monitor["selector"]["matchLabels"].items() <= (
        metrics["metadata"]["labels"] | {"app.kubernetes.io/name": "cluster-bot"}).items()
    assert [e["port"] for e in monitor["endpoints"]] == ["metrics"]
    assert [e["path"] for e in monitor["endpoints"]] == ["/metrics"]
    assert docs["PrometheusRule"]["spec"] == yaml.safe_load((ROOT / "ops/alerts.yaml").read_text())


@pytest.mark.skipif(shutil.which("kubectl") is None,
                    reason="kubectl is not installed: `kubectl kustomize` can't build the base")
def test_the_kustomize_base_builds_and_every_built_manifest_validates():
    built = subprocess.run(["kubectl", "kustomize", str(K8S)], capture_output=True, text=True,
                           timeout=120, check=False)
    assert built.returncode == 0, built.stderr
    docs = [d for d in yaml.safe_load_all(built.stdout) if d]
    assert len(docs) == len(manifests()) + 1  # + the generated policy ConfigMap
    for doc in docs:
        assert doc["metadata"]["labels"]["app.kubernetes.io/name"] == "cluster-bot"
        validate(doc)


# -- systemd --------------------------------------------------------------------------------

UNIT = DEPLOY / "systemd" / "cluster-bot.service"


def unit_settings() -> dict[str, list[str]]:
    """`Key=value` lines by key (a key may repeat: LoadCredential, SystemCallFilter)."""
    found: dict[str, list[str]] = {}
    for line in UNIT.read_text().splitlines():
        if match := re.match(r"^([A-Za-z]+)=(.*)$", line):
            found.setdefault(match[1], []).append(match[2])
    return found


def test_the_unit_is_hardened_and_takes_secrets_as_credentials():
    unit = unit_settings()
    for key, value in (("DynamicUser", "yes"), ("NoNewPrivileges", "yes"),
                       ("ProtectSystem", "strict"), ("StateDirectory", "cluster-bot"),
                       ("PrivateTmp", "yes"), ("CapabilityBoundingSet", "")):
        assert unit.get(key) == [value], key
    assert unit["ExecStart"] == ["/opt/cluster-bot/current/bin/cluster-bot serve"]
    assert unit["ExecStartPre"] == ["/opt/cluster-bot/current/bin/cluster-bot migrate"]
    credentials = [c.split(":", 1)[0] for c in unit["LoadCredential"]]
    assert set(credentials) <= set(SECRET_SETTINGS)
    assert {"SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "AIRESERVE_API_KEY"} <= set(credentials)
    assert "SECRETS_DIR=%d" in unit["Environment"]  # %d: the credentials directory
    assert not any(name in e for e in unit["Environment"] for name in SECRET_SETTINGS)
    assert unit["RestartPreventExitStatus"] == ["2"]  # a bad setting: restarting won't help


@pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                    reason="systemd-analyze is not installed: the structural checks above ran")
def test_systemd_analyze_verify_passes(tmp_path):
    # verify wants the ExecStart binaries to exist: this environment's `cluster-bot` stands in.
    here = Path(sys.executable).parent / "cluster-bot"
    if not here.exists():
        pytest.skip("no cluster-bot script beside this Python (package not installed)")
    unit = tmp_path / UNIT.name
    unit.write_text(UNIT.read_text().replace("/opt/cluster-bot/current/bin/cluster-bot", str(here)))
    result = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True,
                            text=True, timeout=60, check=False)
    assert result.returncode == 0 and result.stdout + result.stderr == "", result.stderr
    unit.write_text(unit.read_text() + "ProtectSystm=strict\n")  # the check can fail
    result = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True,
                            text=True, timeout=60, check=False)
    assert "ProtectSystm" in result.stdout + result.stderr


def write_prometheus_rule() -> None:
    alerts = yaml.safe_load((ROOT / "ops/alerts.yaml").read_text())
    doc = {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
           "metadata": {"name": "cluster-bot", "labels": {"role": "alert-rules"}},
           "spec": alerts}
    (K8S / "prometheusrule.yaml").write_text(
        RULE_HEADER + yaml.safe_dump(doc, sort_keys=False, width=100, allow_unicode=True))


if __name__ == "__main__":
    write_prometheus_rule()


def test_a_stop_drains_before_the_listener_closes():
    """Issue 24 item 5: the grace covers kube-proxy's catch-up (preStop), the listener's drain
    (LISTENER_DRAIN_SECONDS, default 5) and 20 s of work in flight."""
    from bot.config.settings import Settings

    drain = Settings.model_fields["listener_drain_seconds"].default
    [deployment] = [d for d in load_all(K8S / "deployment.yaml") if d["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert "time.sleep(5)" in " ".join(container["lifecycle"]["preStop"]["exec"]["command"])
    assert pod["terminationGracePeriodSeconds"] >= 5 + drain + 20
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    bots = [s for s in compose["services"].values() if s.get("stop_grace_period")]
    assert bots and all(int(s["stop_grace_period"].rstrip("s")) >= drain + 20 for s in bots)
    unit = (DEPLOY / "systemd" / "cluster-bot.service").read_text()
    assert int(unit.split("TimeoutStopSec=")[1].split()[0]) >= drain + 20
