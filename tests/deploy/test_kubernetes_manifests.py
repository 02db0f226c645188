"""deploy/kubernetes/: every manifest is schema-checked (strict: an unknown or misplaced field
fails) against a Kubernetes release's own OpenAPI schemas with `kubernetes-validate`, which
needs no cluster; and what the manifests say about this project (the CLI flags, settings,
probe paths, the HPA's metric, image names, the runner's ping) is checked against the code, so
a renamed flag or metric breaks this test instead of a deployment. What it cannot check (a
real cluster scheduling the pods, the metrics adapter feeding the HPA) is said in
docs/DEPLOY.md."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "kubernetes"
KUBE_VERSION = "1.30"  # the oldest release still in common support when these were written


def _docs() -> list[tuple[str, dict]]:
    out = []
    for path in sorted(K8S.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                out.append((path.name, doc))
    return out


def _by_kind(kind: str) -> dict:
    (doc,) = [d for _, d in _docs() if d["kind"] == kind]
    return doc


def _containers() -> dict[str, dict]:
    return {c["name"]: c for c in _by_kind("Deployment")["spec"]["template"]["spec"]["containers"]}


@pytest.mark.parametrize("name,doc", _docs(), ids=lambda v: v if isinstance(v, str) else v.get("kind", "?"))
def test_manifest_matches_the_kubernetes_schema(name, doc):
    import kubernetes_validate

    kubernetes_validate.validate(doc, KUBE_VERSION, strict=True)


def test_a_wrong_field_is_caught():
    """The validator is strict: the check above can fail."""
    import kubernetes_validate

    bad = yaml.safe_load((K8S / "service.yaml").read_text())
    bad["spec"]["portz"] = bad["spec"].pop("ports")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, KUBE_VERSION, strict=True)


def test_kustomization_lists_every_manifest():
    kust = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert sorted(kust["resources"]) == sorted(p.name for p in K8S.glob("*.yaml") if p.name != "kustomization.yaml")


def test_server_args_and_env_are_the_cli_and_settings():
    import typer

    from reward_server.cli import app
    from reward_server.settings import Settings

    serve = typer.main.get_command(app).commands["serve"]  # the image's entrypoint is `reward-server serve`
    server = _containers()["server"]
    serve.make_context("serve", list(server["args"]))  # raises on a flag `serve` does not take
    for env in server["env"]:
        m = re.fullmatch(r"REWARD_SERVER_([A-Z0-9_]+)", env["name"])
        assert m and m.group(1).lower() in Settings.model_fields, env["name"]


def test_runner_args_are_the_runners_flags():
    help_text = subprocess.run([sys.executable, "-m", "sandbox.runner", "--help"], cwd=ROOT, capture_output=True,
                               text=True, timeout=60, check=True).stdout
    for c in _containers().values():
        if not c["name"].startswith("runner-"):
            continue
        flags = [a for a in c["args"] if a.startswith("--")]
        assert flags
        for f in flags:
            assert re.search(rf"(^|\s){re.escape(f)}[\s,=]", help_text), f"{f} is not a runner flag"
        sock = c["args"][c["args"].index("--socket") + 1]
        assert sock.startswith(c["volumeMounts"][0]["mountPath"] + "/")


def test_runner_ping_is_composes_on_its_own_socket():
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    ping = compose["services"]["runner"]["healthcheck"]["test"][-1]
    for c in _containers().values():
        if c["name"].startswith("runner-"):
            sock = c["args"][c["args"].index("--socket") + 1]
            want = ping.replace("'/run/sandbox/%s.sock'%socket.gethostname()", repr(sock))
            assert c["livenessProbe"]["exec"]["command"][-1] == want


def test_images_are_the_ones_build_images_makes():
    script = (ROOT / "sandbox" / "build_images.sh").read_text()
    for c in _containers().values():
        repo = c["image"].split(":")[0]
        assert re.search(rf"\b{re.escape(repo)}:", script), c["image"]


def test_probes_and_hpa_metric_exist_on_a_live_server(shared_servers):
    srv = shared_servers.get(sandbox="bwrap")
    server = _containers()["server"]
    for probe in ("readinessProbe", "livenessProbe"):
        path = server[probe]["httpGet"]["path"]
        assert httpx.get(srv.url + path, timeout=10).status_code == 200, path
    metric = _by_kind("HorizontalPodAutoscaler")["spec"]["metrics"][0]["pods"]["metric"]["name"]
    text = httpx.get(srv.url + "/metrics", timeout=10).text
    assert re.search(rf"^{re.escape(metric)}(\{{| )", text, re.M), metric
    port = server["ports"][0]["containerPort"]
    assert str(port) in server["args"]
    assert _by_kind("Service")["spec"]["ports"][0]["targetPort"] == server["ports"][0]["name"]
