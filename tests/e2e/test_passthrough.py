"""Pass-through against the real API server: what the cache does not answer reaches the API server
as its caller sent it, and comes back as the API server answered it.

- real kubectl (the oldest and the newest pinned) writes, reads what is not cached, reviews
  access, and fails, through the daemon exactly as straight to the API server: the same output
  and exit code (the daemon serves TLS: kubectl sends a bearer token only over https);
- a create in protobuf passes through as its bytes, answered in JSON or protobuf;
- every caller — admin, a namespace reader, a user with no grants, anonymous, a bad token, a
  user impersonating another — gets through the daemon the code and Status body it gets
  directly, and the API server's audit log records each forwarded request as its caller's,
  never as the daemon's own identity;
- a client reads its writes through the daemon without the daemon asking upstream.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import re
import secrets
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from cacheproxy.daemon.runtime import Daemon
from cacheproxy.envtest import Cluster
from cacheproxy.kube.resources import builtin
from cacheproxy.sim.testpki import generate_pki
from tests.e2e.support import (
    DEFAULT_RESOURCES,
    KUBECTL_GUARD,
    agreeing,
    create,
    daemon_over,
    fresh_namespace,
)
from tests.integration.clients import KUBECTL_VERSIONS, kubectl_binary

pytestmark = pytest.mark.every_server

PROTOBUF = "application/vnd.kubernetes.protobuf"


# ---------------------------------------------------------------------- kubectl, both ways


@dataclass(frozen=True)
class Ran:
    """What one kubectl run did, its namespace written ``{ns}``."""

    code: int
    out: str
    err: str


@dataclass(frozen=True)
class Side:
    """kubectl as admin, straight to the API server or through the daemon, in a namespace of its
    own."""

    kubeconfig: Path
    cache: Path
    namespace: str


@dataclass(frozen=True)
class Kubectl:
    """One kubectl binary, run both ways at once."""

    binary: str
    direct: Side
    through: Side
    env: Mapping[str, str]

    async def run(self, side: Side, *args: str, env: Mapping[str, str] | None = None) -> Ran:
        proc = await asyncio.create_subprocess_exec(
            self.binary,
            "--kubeconfig",
            str(side.kubeconfig),
            "--cache-dir",
            str(side.cache),
            "-n",
            side.namespace,
            *args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**self.env, **(env or {})},
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), KUBECTL_GUARD)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise
        ns = side.namespace
        return Ran(
            proc.returncode or 0,
            out.decode().replace(ns, "{ns}"),
            err.decode().replace(ns, "{ns}"),
        )

    async def both(self, *args: str, env: Mapping[str, str] | None = None) -> tuple[Ran, Ran]:
        """(direct, through the daemon), run at once."""
        direct, through = await asyncio.gather(
            self.run(self.direct, *args, env=env), self.run(self.through, *args, env=env)
        )
        return direct, through

    async def same(self, *args: str, env: Mapping[str, str] | None = None) -> Ran:
        """What kubectl ARGS does both ways, which must be the same; the direct run."""
        direct, through = await self.both(*args, env=env)
        assert through == direct, f"kubectl {' '.join(args)}: {through} != {direct} (direct)"
        return direct

    async def agree(self, *args: str) -> Ran:
        """:meth:`same` for output with ages in it (asked again when a pair straddles a second)."""
        direct, through = await agreeing(lambda: self.both(*args))
        assert through == direct, f"kubectl {' '.join(args)}: {through} != {direct} (direct)"
        return direct


@pytest.fixture(params=KUBECTL_VERSIONS)
def kubectl_version(request: pytest.FixtureRequest) -> str:
    version: str = request.param
    return version


@contextlib.asynccontextmanager
async def tls_daemon(
    cluster: Cluster, directory: Path, *, resources: list[Any] | None = None
) -> AsyncIterator[Path]:
    """The daemon in its default configuration (or caching ``resources``) but serving https: a
    kubeconfig for it as admin."""
    pki = generate_pki(directory / "pki", hosts=("127.0.0.1",))  # makes ``directory`` too
    tls = {"server.tls.certFile": str(pki.server_cert), "server.tls.keyFile": str(pki.server_key)}
    async with daemon_over(cluster, directory, resources=resources, extra=tls) as daemon:
        assert daemon.url.startswith("https://")
        kubeconfig = directory / "admin.kubeconfig"
        doc = yaml.safe_load(cluster.admin.kubeconfig.read_text())
        doc["clusters"][0]["cluster"] = {
            "server": daemon.url,
            "certificate-authority": str(pki.ca_cert),
        }
        kubeconfig.write_text(yaml.safe_dump(doc))
        yield kubeconfig


@pytest.fixture
async def kubectl(
    kubectl_version: str, cluster: Cluster, upstream: httpx.AsyncClient, tmp_path: Path
) -> AsyncIterator[Kubectl]:
    # Namespaces of one length: tables are as wide either way.
    direct_ns, through_ns = await asyncio.gather(
        fresh_namespace(upstream, "kd"), fresh_namespace(upstream, "kp")
    )
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path)}
    async with tls_daemon(cluster, tmp_path / "daemon") as through:
        yield Kubectl(
            kubectl_binary(kubectl_version),
            direct=Side(cluster.admin.kubeconfig, tmp_path / "cache-direct", direct_ns),
            through=Side(through, tmp_path / "cache-through", through_ns),
            env=env,
        )


MANIFEST = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: cm, labels: {group: g}}
data: {key: KEY}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cm-2, labels: {group: g}}
data: {key: two}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {group: g}}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      nodeSelector: {beta.kubernetes.io/os: linux}  # deprecated: upstream answers a Warning
      containers: [{name: c, image: nginx}]
"""

APPLIED = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: cm-ssa}
data: {key: VALUE}
"""


@pytest.mark.kubectl
async def test_kubectl_writes_through_the_daemon_as_straight_to_the_api_server(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    v1, v2 = tmp_path / "v1.yaml", tmp_path / "v2.yaml"
    v1.write_text(MANIFEST.replace("KEY", "one"))
    v2.write_text(MANIFEST.replace("KEY", "changed"))
    ssa, ssa_other = tmp_path / "ssa.yaml", tmp_path / "ssa-other.yaml"
    ssa.write_text(APPLIED.replace("VALUE", "mine"))
    ssa_other.write_text(APPLIED.replace("VALUE", "theirs"))
    editor = tmp_path / "editor.sh"
    editor.write_text("#!/bin/sh\nexec sed -i -e 's/key: changed/key: edited/' \"$1\"\n")
    editor.chmod(0o755)
    same = kubectl.same

    created = await same("apply", "-f", str(v1))
    assert created.code == 0 and "configmap/cm created" in created.out, created
    assert "Warning: spec.template.spec.nodeSelector" in created.err, created
    assert "unchanged" in (await same("apply", "-f", str(v1))).out  # read back from the cache
    exists = await same("create", "-f", str(v1))
    assert exists.code == 1 and exists.err.count("AlreadyExists") == 3, exists
    assert "configmap/cm configured" in (await same("apply", "-f", str(v2))).out
    assert "configmap/cm replaced" in (await same("replace", "-f", str(v2))).out
    assert (await same("create", "configmap", "lit", "--from-literal", "a=b")).code == 0
    assert "server dry run" in (await same("delete", "configmap", "lit", "--dry-run=server")).out
    assert (await same("set", "image", "deployment/web", "c=nginx:1")).code == 0
    edited = await same("edit", "configmap", "cm", env={"KUBE_EDITOR": str(editor)})
    assert (edited.code, edited.out.strip()) == (0, "configmap/cm edited"), edited
    for patch in (
        ("deployment", "web", "-p", '{"spec":{"template":{"spec":{"containers":[{"name":"c","image":"nginx:2"}]}}}}'),
        ("configmap", "cm", "--type", "merge", "-p", '{"data":{"m":"1"}}'),
        ("configmap", "cm", "--type", "json", "-p", '[{"op":"add","path":"/data/j","value":"2"}]'),
        ("configmap", "cm", "--type", "json", "-p", '[{"op":"remove","path":"/data/nope"}]'),
    ):  # fmt: skip
        await same("patch", *patch)
    assert (await same("apply", "--server-side", "-f", str(ssa))).code == 0
    conflict = await same(
        "apply", "--server-side", "--field-manager", "other", "-f", str(ssa_other)
    )
    assert conflict.code != 0 and "conflict" in conflict.err.lower(), conflict
    assert (await same("label", "configmap", "cm", "team=blue")).code == 0
    assert (await same("label", "configmap", "cm", "team=red")).code != 0  # no --overwrite
    assert (await same("annotate", "deployment", "web", "note=yes")).code == 0
    assert (await same("scale", "deployment", "web", "--replicas", "3")).code == 0
    assert (await same("rollout", "restart", "deployment", "web")).code == 0
    state = await same(
        "get",
        "configmap/cm",
        "configmap/cm-ssa",
        "deployment/web",
        "-o",
        # (Not the pod template's annotations: `rollout restart` stamps the second it ran,
        # which may differ between the two sides.)
        "jsonpath={range .items[*]}{.metadata.name} {.data} {.metadata.labels}"
        " {.spec.replicas} {.spec.template.spec.containers[0].image}{'\\n'}{end}",
    )
    assert "edited" in state.out and "nginx:2" in state.out and "mine" in state.out, state
    assert "configmap/lit" in (await same("get", "configmaps", "-o", "name")).out  # dry run
    assert (await same("annotate", "deployment", "web", "note-")).code == 0
    await same("delete", "configmap", "cm")
    assert (await same("delete", "configmap", "cm")).code == 1  # NotFound
    await same("delete", "configmaps", "-l", "group=g")
    await same("delete", "configmaps,deployments", "--all")
    gone = await same("get", "configmaps,deployments")
    assert (gone.code, gone.out) == (0, ""), gone


@pytest.mark.kubectl
async def test_a_patch_that_changes_nothing_is_a_known_difference(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    # kubectl compares the object it read (a get the cache answers: without managedFields,
    # which the default transform drops) with the patch's answer (upstream's, with them):
    # directly it says "patched (no change)", through the daemon "patched". Known and
    # documented (docs/operations.md, "What passes through"); everything else matches.
    manifest = tmp_path / "v1.yaml"
    manifest.write_text(MANIFEST.replace("KEY", "one"))
    assert (await kubectl.same("apply", "-f", str(manifest))).code == 0
    for patch in (
        ("configmap", "cm", "--type", "merge", "-p", '{"data":{"key":"one"}}'),
        ("deployment", "web", "--type", "merge", "-p", '{"metadata":{"labels":{"group":"g"}}}'),
        ("deployment", "web", "-p", '{"spec":{"replicas":1}}'),
    ):
        direct, through = await kubectl.both("patch", *patch)
        assert (direct.code, through.code) == (0, 0), (direct, through)
        assert direct.out.endswith("patched (no change)\n"), direct
        assert through.out == direct.out.replace(" (no change)", ""), (direct, through)


def _jwt_claims(token: str) -> dict[str, Any]:
    header, claims, signature = token.split(".")
    assert json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))["alg"]
    assert signature
    decoded: dict[str, Any] = json.loads(
        base64.urlsafe_b64decode(claims + "=" * (-len(claims) % 4))
    )
    return decoded


@pytest.mark.kubectl
async def test_kubectl_creates_tokens_and_reviews_access_through_the_daemon(
    kubectl: Kubectl, upstream: httpx.AsyncClient
) -> None:
    direct, through = await kubectl.both("create", "token", "default")
    assert through.code == direct.code == 0, (direct, through)
    for ran, side in ((direct, kubectl.direct), (through, kubectl.through)):
        claims = _jwt_claims(ran.out.strip())
        assert claims["sub"] == f"system:serviceaccount:{side.namespace}:default"
        review = await upstream.post(
            "/apis/authentication.k8s.io/v1/tokenreviews",
            json={"spec": {"token": ran.out.strip()}},
        )
        assert review.json()["status"]["authenticated"] is True, review.text
        assert review.json()["status"]["user"]["username"] == claims["sub"]
    missing = await kubectl.same("create", "token", "nope")
    assert missing.code == 1 and "not found" in missing.err, missing
    yes = await kubectl.same("auth", "can-i", "create", "configmaps")
    assert (yes.code, yes.out.strip()) == (0, "yes")
    no = await kubectl.same("auth", "can-i", "create", "configmaps", "--as", "nobody")
    assert (no.code, no.out.strip()) == (1, "no")
    rules = await kubectl.same("auth", "can-i", "--list", "--as", "reader")  # a rules review
    assert rules.code == 0 and "selfsubjectaccessreviews" in rules.out, rules


async def _pod_with_an_event(upstream: httpx.AsyncClient, ns: str, when: str) -> None:
    pod = await create(
        upstream,
        f"/api/v1/namespaces/{ns}/pods",
        {
            "metadata": {"name": "p"},
            # No token volume: its name ends in a random suffix.
            "spec": {
                "containers": [{"name": "c", "image": "nginx"}],
                "automountServiceAccountToken": False,
            },
        },
    )
    await create(
        upstream,
        f"/api/v1/namespaces/{ns}/events",
        {
            "metadata": {"name": "p.1"},
            "involvedObject": {
                "kind": "Pod",
                "namespace": ns,
                "name": "p",
                "uid": pod["metadata"]["uid"],
                "apiVersion": "v1",
            },
            "reason": "Pulling",
            "message": 'Pulling image "nginx"',
            "type": "Normal",
            "source": {"component": "kubelet"},
            "firstTimestamp": when,
            "lastTimestamp": when,
            "count": 1,
        },
    )
    await create(upstream, f"/api/v1/namespaces/{ns}/secrets", {"metadata": {"name": "s"}})
    role = {
        "metadata": {"name": "r"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}],
    }
    await create(upstream, f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles", role)


@pytest.fixture
async def pods(kubectl: Kubectl, upstream: httpx.AsyncClient) -> Kubectl:
    """:func:`kubectl` with, in each namespace, pod ``p`` (never scheduled: no kubelet runs)
    and an Event about it, secret ``s`` and role ``r``."""
    when = "2026-01-01T00:00:00Z"  # the same age on both sides
    await asyncio.gather(
        _pod_with_an_event(upstream, kubectl.direct.namespace, when),
        _pod_with_an_event(upstream, kubectl.through.namespace, when),
    )
    return kubectl


@pytest.mark.kubectl
async def test_kubectl_reads_what_the_cache_does_not_hold_as_from_the_api_server(
    pods: Kubectl, cluster: Cluster, tmp_path: Path
) -> None:
    described = await pods.agree("describe", "pod", "p")  # the pod's Events from the cache
    assert "Pulling image" in described.out, described
    uncached = [r for r in DEFAULT_RESOURCES if r != "events"]
    async with tls_daemon(cluster, tmp_path / "events", resources=uncached) as kubeconfig:
        forwarded = replace(pods, through=replace(pods.through, kubeconfig=kubeconfig))
        assert await forwarded.agree("describe", "pod", "p") == described
        assert (await forwarded.agree("get", "events")).code == 0
    for kind in ("secrets", "serviceaccounts"):
        listed = await pods.agree("get", kind)
        assert listed.code == 0 and listed.out.count("\n") >= 2, listed
    # Roles print when they were created: the two sides' were made a moment apart.
    direct, through = await pods.both("get", "roles")
    stamp = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
    assert stamp.sub("T", through.out) == stamp.sub("T", direct.out), (direct, through)
    assert direct.code == through.code == 0 and direct.out.count("\n") >= 2, direct
    assert (await pods.agree("get", "events")).code == 0
    explained = await pods.same("explain", "configmap.data")  # upstream's OpenAPI
    assert explained.code == 0 and "ConfigMap" in explained.out, explained
    assert (await pods.same("version", "-o", "json")).code == 0
    resources = await pods.same("api-resources")
    assert "selfsubjectaccessreviews" in resources.out, "upstream's discovery, not the cache's"


@pytest.mark.kubectl
async def test_kubectl_logs_and_exec_answer_through_the_daemon_as_the_api_server_does(
    pods: Kubectl,
) -> None:
    # No kubelet runs: the API server's own answers, either way (no log yet, no host to exec on).
    await pods.same("logs", "p")
    assert (await pods.same("logs", "p", "-c", "nope")).code == 1
    assert (await pods.same("logs", "p", "--tail", "1", "--timestamps")).code == 0
    ran = await pods.same("exec", "p", "--", "true")
    assert ran.code == 1 and "does not have a host assigned" in ran.err, ran


# ---------------------------------------------------------------------- protobuf


@pytest.fixture
async def admin_proxy(cluster: Cluster, daemon: Daemon) -> AsyncIterator[httpx.AsyncClient]:
    """The daemon, as admin: what passes through is admin's."""
    async with httpx.AsyncClient(base_url=daemon.url, headers=cluster.admin.headers) as c:
        yield c


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _read_varint(data: bytes, at: int) -> tuple[int, int]:
    """The varint at ``at``, and where it ends."""
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def _fields(message: bytes) -> list[tuple[int, bytes, bytes | None]]:
    """``message``'s fields in order: (number, its whole encoding, the value of a
    length-delimited one)."""
    out: list[tuple[int, bytes, bytes | None]] = []
    at = 0
    while at < len(message):
        start = at
        key, at = _read_varint(message, at)
        value = None
        wire = key & 7
        if wire == 0:
            _, at = _read_varint(message, at)
        elif wire == 2:
            size, at = _read_varint(message, at)
            value, at = message[at : at + size], at + size
        else:
            at += {1: 8, 5: 4}[wire]
        out.append((key >> 3, message[start:at], value))
    return out


def _without_meta_fields(body: bytes, drop: set[int]) -> bytes:
    """A protobuf-encoded object (the ``k8s\\x00`` envelope: an ``Unknown``, whose field 2 is
    the object, whose field 1 is its ObjectMeta) with the ObjectMeta fields ``drop`` removed."""
    magic = b"k8s\x00"
    assert body.startswith(magic)

    def rebuild(message: bytes, number: int, change: Any) -> bytes:
        out = b""
        for n, encoded, value in _fields(message):
            if n == number and value is not None:
                changed = change(value)
                encoded = _varint(n << 3 | 2) + _varint(len(changed)) + changed
            out += encoded
        return out

    def meta(m: bytes) -> bytes:
        return b"".join(encoded for n, encoded, _ in _fields(m) if n not in drop)

    return magic + rebuild(body[len(magic) :], 2, lambda obj: rebuild(obj, 1, meta))


UID, RESOURCE_VERSION, CREATION_TIMESTAMP, MANAGED_FIELDS = 5, 6, 8, 17
"""ObjectMeta's field numbers (k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto)."""


def _made_anew(obj: Mapping[str, Any]) -> dict[str, Any]:
    """``obj`` without what the API server sets on each create."""
    meta = {
        k: v
        for k, v in obj["metadata"].items()
        if k not in ("uid", "resourceVersion", "creationTimestamp", "managedFields")
    }
    return {**obj, "metadata": meta}


async def test_a_create_in_protobuf_passes_through_as_its_bytes(
    daemon: Daemon, upstream: httpx.AsyncClient, admin_proxy: httpx.AsyncClient
) -> None:
    proxy = admin_proxy
    assert daemon.server is not None
    consistency = daemon.server.resources[builtin("configmaps")].consistency
    assert consistency is not None
    ns = await fresh_namespace(upstream)
    path = f"/api/v1/namespaces/{ns}/configmaps"
    original = await create(
        upstream,
        path,
        {
            "metadata": {"name": "pb", "labels": {"a": "b"}, "annotations": {"note": "x"}},
            "data": {"key": "value", "other": "ünïcode"},
            "binaryData": {"bin": base64.b64encode(bytes(range(256))).decode()},
        },
    )
    read = await upstream.get(f"{path}/pb", headers={"Accept": PROTOBUF})
    assert read.headers["content-type"] == PROTOBUF, read.headers
    # A create may not carry a resourceVersion; the rest is as the API server wrote it.
    body = _without_meta_fields(
        read.content, {UID, RESOURCE_VERSION, CREATION_TIMESTAMP, MANAGED_FIELDS}
    )
    headers = {"Content-Type": PROTOBUF}

    async def recreate(client: httpx.AsyncClient, accept: str) -> httpx.Response:
        await upstream.delete(f"{path}/pb")
        return await client.post(path, content=body, headers={**headers, "Accept": accept})

    direct = await recreate(upstream, "application/json")
    through = await recreate(proxy, "application/json")
    assert (through.status_code, direct.status_code) == (201, 201), (through.text, direct.text)
    assert _made_anew(through.json()) == _made_anew(direct.json()) == _made_anew(original)
    now = (await upstream.get(f"{path}/pb")).json()
    assert now["metadata"]["uid"] == through.json()["metadata"]["uid"]
    assert _made_anew(now) == _made_anew(original)
    # Answered in protobuf, whose resourceVersion the read that follows waits for.
    made = await recreate(proxy, PROTOBUF)
    assert (made.status_code, made.headers["content-type"]) == (201, PROTOBUF), made.text
    assert consistency.written() == int(
        (await upstream.get(f"{path}/pb")).json()["metadata"]["resourceVersion"]
    )
    before = replace(consistency.stats)
    cached = (await proxy.get(f"{path}/pb")).json()
    assert consistency.stats.after_write + consistency.stats.live == (
        before.after_write + before.live + 1
    )
    assert consistency.stats.probes == before.probes
    assert cached["metadata"]["uid"] == (await upstream.get(f"{path}/pb")).json()["metadata"]["uid"]
    again = await proxy.post(path, content=body, headers=headers)
    refused = await upstream.post(path, content=body, headers=headers)
    assert (again.status_code, again.json()) == (refused.status_code, refused.json())
    assert refused.status_code == 409


# ---------------------------------------------------------------------- who upstream sees

CALLERS: dict[str, tuple[str | None, dict[str, str]]] = {
    # name: (the user whose token it sends, more headers)
    "admin": ("admin", {}),
    "reader": ("reader", {}),
    "nobody": ("nobody", {}),
    "anonymous": (None, {}),
    "garbage": (None, {"Authorization": "Bearer not-a-token"}),
    "nobody-as-admin": ("nobody", {"Impersonate-User": "admin"}),
    "admin-as-reader": ("admin", {"Impersonate-User": "reader"}),
}
AUDITED_AS: dict[str, tuple[str | None, str | None]] = {
    # name: (the user the audit log names, the user it impersonated)
    "admin": ("admin", None),
    "reader": ("reader", None),
    "nobody": ("nobody", None),
    "anonymous": ("system:anonymous", None),
    "garbage": (None, None),  # not authenticated: no user
    "nobody-as-admin": ("nobody", None),  # it may not impersonate: refused
    "admin-as-reader": ("admin", "reader"),
}


@dataclass(frozen=True)
class Asked:
    method: str
    path: str
    body: Mapping[str, Any] | None = None
    accept: str = "application/json"


def _requests(ns: str, name: str) -> dict[str, Asked]:
    """The requests of the matrix; ``name``: of what a create makes."""
    return {
        "create": Asked("POST", f"/api/v1/namespaces/{ns}/configmaps", {"metadata": {"name": name}}),
        "secret": Asked("GET", f"/api/v1/namespaces/{ns}/secrets/s"),
        "secret-protobuf": Asked("GET", f"/api/v1/namespaces/{ns}/secrets/s", accept=PROTOBUF),
        "delete-collection": Asked("DELETE", f"/api/v1/namespaces/{ns}/configmaps?labelSelector=none"),
        "pod-status": Asked("GET", f"/api/v1/namespaces/{ns}/pods/p/status"),
        "token": Asked(
            "POST",
            f"/api/v1/namespaces/{ns}/serviceaccounts/default/token",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
        ),
        "access-review": Asked(
            "POST",
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SelfSubjectAccessReview",
                "spec": {
                    "resourceAttributes": {"namespace": ns, "verb": "create", "resource": "configmaps"}
                },
            },
        ),
    }  # fmt: skip


def _comparable(response: httpx.Response, name: str) -> Any:
    """An answer without what differs on each request (a created object's identity, a token, a
    list's resourceVersion)."""
    if not response.headers["content-type"].startswith("application/json"):
        return response.status_code, response.headers["content-type"], response.content
    body = response.json()
    if body.get("kind") == "Status":
        return response.status_code, body
    out = _made_anew(body)
    out["metadata"] = {k: ("NAME" if v == name else v) for k, v in out["metadata"].items()}
    if body.get("kind") == "TokenRequest":
        out["status"] = sorted(body["status"])
    return response.status_code, out


@dataclass(frozen=True)
class Audited:
    cluster: Cluster
    daemon: Daemon
    since: int
    """Where the audit log was when the daemon started."""


@pytest.fixture
async def audited(audited_cluster: Cluster, tmp_path: Path) -> AsyncIterator[Audited]:
    """The audited cluster, with the daemon in front as its own user ``cacheproxy`` (which may
    read everything and write nothing)."""
    since = audited_cluster.audit_end()
    daemon_user = {"upstream.kubeconfig": str(audited_cluster.users["cacheproxy"].kubeconfig)}
    async with daemon_over(audited_cluster, tmp_path, extra=daemon_user) as daemon:
        yield Audited(audited_cluster, daemon, since)


async def test_each_caller_gets_its_own_answer_and_upstream_audits_it_as_the_caller(
    audited: Audited,
) -> None:
    cluster, daemon, start = audited.cluster, audited.daemon, audited.since
    run = secrets.token_hex(4)
    ns = cluster.reader_namespace
    async with cluster.async_client() as admin:
        for path, body in (
            (f"/api/v1/namespaces/{ns}/secrets", {"metadata": {"name": "s"}}),
            (
                f"/api/v1/namespaces/{ns}/pods",
                {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x"}]}},
            ),
        ):
            made = await admin.post(path, json=body)
            assert made.status_code in (201, 409), made.text
    audit_ids: dict[tuple[str, str, str], str] = {}
    answers: dict[tuple[str, str, str], Any] = {}
    async with (
        cluster.async_client(None) as direct,
        httpx.AsyncClient(base_url=daemon.url, timeout=30) as through,
    ):
        for caller, (user, extra) in CALLERS.items():
            headers = {**(cluster.users[user].headers if user else {}), **extra}
            for side, client in (("direct", direct), ("through", through)):
                name = f"cm-{run}-{caller}-{side}"
                for what, asked in _requests(ns, name).items():
                    key = (caller, what, side)
                    audit_ids[key] = f"{run}-{caller}-{what}-{side}"
                    response = await client.request(
                        asked.method,
                        asked.path,
                        json=asked.body,
                        headers={
                            **headers,
                            "Accept": asked.accept,
                            "Audit-ID": audit_ids[key],
                            "User-Agent": run,
                        },
                    )
                    answers[key] = _comparable(response, name)
    differ = [
        f"{caller} {what}: through the daemon {answers[caller, what, 'through']}, "
        f"directly {answers[caller, what, 'direct']}"
        for caller, what, side in answers
        if side == "direct" and answers[caller, what, "through"] != answers[caller, what, side]
    ]
    assert not differ, "\n".join(differ)
    for what in ("secret", "secret-protobuf", "delete-collection"):
        codes = {answers[caller, what, "direct"][0] for caller in CALLERS}
        assert codes == {200, 401, 403}, f"{what}: the matrix holds each outcome"

    # The audit log: each request's event, found by the Audit-ID it was sent with.
    wanted = set(audit_ids.values())
    events: dict[str, dict[str, Any]] = {}
    deadline = asyncio.get_running_loop().time() + 20
    while not wanted <= events.keys() and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.1)
        events = {e["auditID"]: e for e in cluster.audit_events(since=start)}
    assert wanted <= events.keys(), f"no audit events for {sorted(wanted - events.keys())}"

    def who(event: Mapping[str, Any]) -> tuple[Any, ...]:
        ref = dict(event.get("objectRef", {}))
        if ref.get("name", "").startswith(f"cm-{run}-"):
            ref["name"] = "NAME"  # what a create made: a name per side
        return (
            event["user"].get("username"),
            event.get("impersonatedUser", {}).get("username"),
            event["verb"],
            ref,
            event["responseStatus"]["code"],
            event["userAgent"],
        )

    for caller, what, side in audit_ids:
        if side == "direct":
            mine = events[audit_ids[caller, what, "through"]]
            theirs = events[audit_ids[caller, what, side]]
            assert who(mine) == who(theirs), (caller, what)
            assert who(mine)[:2] == AUDITED_AS[caller], (caller, what, mine)
    # The daemon's own identity only read, and never what the callers asked.
    ours = [
        e for e in cluster.audit_events(since=start) if e["user"].get("username") == "cacheproxy"
    ]
    assert ours, "the daemon's own requests are in the log"
    for event in ours:
        assert event["verb"] in ("get", "list", "watch"), event
        assert event.get("objectRef", {}).get("resource") not in (
            "secrets",
            "serviceaccounts",
            "selfsubjectaccessreviews",
        ), event
        assert not event["auditID"].startswith(run), event


# ---------------------------------------------------------------------- read your writes

WRITES = 500


async def test_reads_after_each_write_through_the_daemon_see_it_without_asking_upstream(
    daemon: Daemon, upstream: httpx.AsyncClient, admin_proxy: httpx.AsyncClient
) -> None:
    proxy = admin_proxy
    assert daemon.server is not None
    consistency = daemon.server.resources[builtin("configmaps")].consistency
    assert consistency is not None
    ns = await fresh_namespace(upstream)
    path = f"/api/v1/namespaces/{ns}/configmaps"
    made = await proxy.post(path, json={"metadata": {"name": "ryw"}, "data": {"n": "0"}})
    assert made.status_code == 201, made.text
    before = replace(consistency.stats)
    stale: list[str] = []
    for n in range(1, WRITES + 1):
        written = await proxy.patch(
            f"{path}/ryw",
            json={"data": {"n": str(n)}},
            headers={"Content-Type": "application/merge-patch+json"},
        )
        assert written.status_code == 200, written.text
        rv = written.json()["metadata"]["resourceVersion"]
        got = (await proxy.get(f"{path}/ryw")).json()
        listed = (await proxy.get(path)).json()
        if (got["metadata"]["resourceVersion"], got["data"]) != (rv, {"n": str(n)}):
            stale.append(f"get after write {n} (rv {rv}): {got['metadata']}")
        if [i["data"] for i in listed["items"]] != [{"n": str(n)}]:
            stale.append(f"list after write {n} (rv {rv}): {listed['items']}")
    assert stale == []
    after = consistency.stats
    # Each from the cache: once it held the write (at once when its event was already in).
    assert (after.after_write + after.live) - (before.after_write + before.live) == 2 * WRITES
    asked = (after.probes, after.listings, after.object_checks)
    assert asked == (before.probes, before.listings, before.object_checks), "no read asked upstream"


# ---------------------------------------------------------------------- reads the cache cannot answer


@pytest.mark.parametrize("verb", ["list", "get"])
async def test_a_read_at_an_rv_upstream_has_not_reached_gets_its_504_through_the_daemon(
    upstream: httpx.AsyncClient, admin_proxy: httpx.AsyncClient, verb: str
) -> None:
    """Not older than an RV no server has reached: the cache cannot answer it, and the read goes
    upstream as asked, so upstream applies its own rule (it waits, then 504) instead of answering
    a newer read at an older RV."""
    listed = await upstream.get("/api/v1/namespaces/ns-0/pods", params={"limit": "1"})
    future = str(int(listed.json()["metadata"]["resourceVersion"]) + 1_000_000)
    path = "/api/v1/namespaces/ns-0/pods"
    if verb == "get":
        path += "/" + listed.json()["items"][0]["metadata"]["name"]
    up, down = await asyncio.gather(
        upstream.get(path, params={"resourceVersion": future}, timeout=30),
        admin_proxy.get(path, params={"resourceVersion": future}, timeout=30),
    )
    assert up.status_code == 504, up.text
    assert down.status_code == up.status_code, down.text
    assert down.headers.get("retry-after") == up.headers.get("retry-after") == "1"
    mine, theirs = down.json(), up.json()
    assert (mine["reason"], mine["details"]["causes"]) == (
        theirs["reason"],
        theirs["details"]["causes"],
    )
    assert "Too large resource version" in mine["message"], mine


# ---------------------------------------------------------------------- writes held for the cache


async def test_each_write_through_the_daemon_is_answered_once_its_cache_holds_it(
    daemon: Daemon, upstream: httpx.AsyncClient, admin_proxy: httpx.AsyncClient
) -> None:
    """What the API server answers — an object, a ``Status`` for a delete, a list for a
    ``deletecollection``, a ``Status`` for a binding — each is held until the daemon's cache holds
    the write, so the writer's next read or watch event through the daemon has it. Straight from
    the API server, the watch event comes a millisecond or two after the answer: unheld, the
    checks after each answer would find the cache behind."""
    assert daemon.server is not None
    configmaps = daemon.server.resources[builtin("configmaps")].store
    pods = daemon.server.resources[builtin("pods")].store
    ns = await fresh_namespace(upstream)
    path = f"/api/v1/namespaces/{ns}/configmaps"
    behind: list[str] = []
    for n in range(40):
        made = await admin_proxy.post(
            path, json={"metadata": {"name": f"c{n}", "labels": {"batch": str(n % 2)}}}
        )
        assert made.status_code == 201, made.text
        entry = configmaps.get(f"{ns}/c{n}")
        if entry is None or str(entry.rv) != made.json()["metadata"]["resourceVersion"]:
            behind.append(f"create c{n}")
        patched = await admin_proxy.patch(
            f"{path}/c{n}",
            json={"data": {"n": str(n)}},
            headers={"Content-Type": "application/merge-patch+json"},
        )
        assert patched.status_code == 200, patched.text
        entry = configmaps.get(f"{ns}/c{n}")
        if entry is None or str(entry.rv) != patched.json()["metadata"]["resourceVersion"]:
            behind.append(f"patch c{n}")
    for n in range(0, 40, 4):
        gone = await admin_proxy.delete(f"{path}/c{n}")
        assert gone.status_code == 200, gone.text
        if configmaps.get(f"{ns}/c{n}") is not None:
            behind.append(f"delete c{n}")
    collection = await admin_proxy.delete(path, params={"labelSelector": "batch=1"})
    assert collection.status_code == 200, collection.text
    left = sorted(filter(lambda key: key.startswith(f"{ns}/"), configmaps.keys()))
    assert left == sorted(f"{ns}/c{n}" for n in range(40) if n % 2 == 0 and n % 4), left
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    await create(upstream, f"/api/v1/namespaces/{ns}/pods", pod)
    nodes = await upstream.get("/api/v1/nodes")
    node = nodes.json()["items"][0]["metadata"]["name"]
    for _ in range(100):  # the daemon's cache has the pod (as a client's informer would)
        if pods.get(f"{ns}/p") is not None:
            break
        await asyncio.sleep(0.05)
    before = pods.get(f"{ns}/p")
    assert before is not None
    bound = await admin_proxy.post(
        f"/api/v1/namespaces/{ns}/pods/p/binding",
        json={"metadata": {"name": "p"}, "target": {"kind": "Node", "name": node}},
    )
    assert bound.status_code == 201, bound.text
    after = pods.get(f"{ns}/p")
    if after is None or after.rv <= before.rv:
        behind.append("binding p")
    assert behind == []
