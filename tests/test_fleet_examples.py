"""The fleet's deployment examples hold: examples/fleet/cluster.yaml against the Ray cluster launcher's schema
and its own config preparation, examples/fleet/raycluster.yaml against KubeRay's RayCluster CRD, and both
with cud's units, config and security model (docs/fleets.md).

The launcher's schema is read from the installed Ray (the fleet extra ships ``ray/autoscaler/ray-schema.json``),
so the check follows the Ray cud is installed with. The CRD is KubeRay's, vendored under its Apache-2.0
license in tests/data/kuberay/ (SOURCE.txt says from where). Besides validating, every key the examples
write must be one the schema names: the launcher's provider section and most of Kubernetes' schemas accept
unknown keys (Kubernetes prunes them silently), so a misspelt key would otherwise pass and do nothing.
"""

from __future__ import annotations

import copy
import dataclasses
import gzip
import importlib.util
import ipaddress
import json
import os
import pwd
import re
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.support.daemon import ROOT
from tests.support.units import SYSTEMD, unit_settings

FLEET = ROOT / "examples" / "fleet"
CRD = ROOT / "tests" / "data" / "kuberay" / "ray.io_rayclusters.yaml.gz"
#: The user a fleet node runs as (systemd/cud-fleet.service, and the image's in raycluster.yaml).
FLEET_USER = "cud-fleet"


def ray_schema() -> dict[str, Any]:
    """The cluster launcher's JSON schema, from the installed Ray (found without importing Ray)."""
    spec = importlib.util.find_spec("ray")
    assert spec and spec.submodule_search_locations, "Ray is missing: install cud's fleet extra (make setup does)"
    path = Path(next(iter(spec.submodule_search_locations))) / "autoscaler" / "ray-schema.json"
    return json.loads(path.read_text())


def crd_schema() -> dict[str, Any]:
    crd = yaml.safe_load(gzip.decompress(CRD.read_bytes()))
    assert crd["spec"]["names"]["kind"] == "RayCluster"
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    return version["schema"]["openAPIV3Schema"]


def unknown_keys(doc: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Every key of ``doc`` that ``schema`` does not name, as a dotted path.

    An object schema names its keys in ``properties``; ``patternProperties`` or an ``additionalProperties``
    schema make it a map (its values are checked against that); an object schema that says nothing of its
    keys (Kubernetes' ``metadata``) is free-form. ``additionalProperties: true`` does not make a key known.
    """
    found: list[str] = []
    if isinstance(doc, list):
        items = schema.get("items")
        for n, item in enumerate(doc):
            if isinstance(items, dict):
                found += unknown_keys(item, items, f"{path}[{n}]")
        return found
    if not isinstance(doc, dict):
        return found
    properties = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    extra = schema.get("additionalProperties")
    if not properties and not patterns and not isinstance(extra, dict):
        return found  # free-form
    for key, value in doc.items():
        where = f"{path}.{key}" if path else key
        if key in properties:
            found += unknown_keys(value, properties[key], where)
        elif any(re.search(pattern, key) for pattern in patterns):
            pattern = next(p for p in patterns if re.search(p, key))
            found += unknown_keys(value, patterns[pattern], where)
        elif isinstance(extra, dict):
            found += unknown_keys(value, extra, where)
        else:
            found.append(where)
    return found


def load_cud_config(text: str, tmp_path: Path) -> Any:
    """``text`` through cud's own config loader, its [fleet] table included.

    The loader checks that [access] names existing users: the fleet's user cud-fleet (made by
    cud.sysusers.conf, or the image) stands in as this machine's user, and comes back in the result.
    """
    from cud.daemon.config import load_config

    me = pwd.getpwuid(os.getuid()).pw_name
    assert f'"{me}"' not in text
    path = tmp_path / "cud.toml"
    path.write_text(text.replace(f'"{FLEET_USER}"', f'"{me}"'))
    config = load_config(path, env={"CUD_SOCKET": "/run/cud/cud.sock"})
    rename = {me: FLEET_USER}
    access = dataclasses.replace(config.access, **{
        field.name: tuple(rename.get(n, n) for n in getattr(config.access, field.name))
        for field in dataclasses.fields(config.access)})
    return dataclasses.replace(config, access=access)


# -- the schema walk itself -----------------------------------------------------------------------
def test_unknown_keys_finds_a_misspelt_key_at_any_depth() -> None:
    schema = {"type": "object", "additionalProperties": False, "properties": {
        "provider": {"type": "object", "additionalProperties": True, "properties": {"type": {}, "worker_ips": {}}},
        "nodes": {"type": "array", "items": {"type": "object", "properties": {"name": {}}}},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "metadata": {"type": "object"}}}
    doc = {"provider": {"type": "local", "worker_ip": []}, "nodes": [{"name": "a"}, {"nmae": "b"}],
           "labels": {"anything": "x"}, "metadata": {"whatever": {"deep": 1}}, "extra": 1}
    assert unknown_keys(doc, schema) == ["provider.worker_ip", "nodes[1].nmae", "extra"]


# -- Ray's cluster launcher: examples/fleet/cluster.yaml ------------------------------------------
@pytest.fixture(scope="module")
def cluster() -> dict[str, Any]:
    return yaml.safe_load((FLEET / "cluster.yaml").read_text())


def test_cluster_yaml_is_valid_for_the_installed_rays_launcher(cluster: dict[str, Any]) -> None:
    schema = ray_schema()
    jsonschema.validate(cluster, schema)
    assert unknown_keys(cluster, schema) == []
    # What `ray up` does with it before reaching any machine: the local provider's preparation
    # (one node type, min = max = the worker IPs), then the same schema on the result.
    from ray.autoscaler._private.util import prepare_config, validate_config

    prepared = prepare_config(copy.deepcopy(cluster))
    validate_config(prepared)
    assert prepared["max_workers"] == len(cluster["provider"]["worker_ips"]) == 2  # three VMs: a head, two workers
    # The control: the walk catches a misspelt provider key, which the schema itself lets through.
    broken = copy.deepcopy(cluster)
    broken["provider"]["worker_ip"] = broken["provider"].pop("worker_ips")
    jsonschema.validate(broken, schema)
    assert unknown_keys(broken, schema) == ["provider.worker_ip"]


def test_cluster_yaml_stays_on_a_private_network_with_the_dashboard_on_loopback(cluster: dict[str, Any]) -> None:
    provider = cluster["provider"]
    assert provider["type"] == "local"
    for ip in [provider["head_ip"], *provider["worker_ips"]]:
        assert ipaddress.ip_address(ip).is_private, ip
    commands = "\n".join(str(c) for key, value in cluster.items() if key.endswith("_commands") for c in value)
    assert "0.0.0.0" not in commands
    (start,) = [c for c in cluster["head_start_ray_commands"] if " start " in c]
    assert {"--head", "--dashboard-host=127.0.0.1", "--disable-usage-stats"} <= set(start.split())
    # Ray's token authentication: the head starts with it, its shells' drivers use it, and every VM
    # gets the one token; a worker's as the credential cud-fleet.service loads.
    assert start.startswith("export RAY_AUTH_MODE=token;")
    assert any("export RAY_AUTH_MODE=token" in c for c in cluster["head_setup_commands"])
    assert cluster["file_mounts"]["~/.ray/auth_token"] == "~/.ray/auth_token"
    credential = next(c for c in unit_settings(SYSTEMD / "cud-fleet.service")["LoadCredential"]
                      if c.startswith("ray-auth-token:"))
    assert f"sudo install -m 0600 -o root -g root ~/.ray/auth_token {credential.partition(':')[2]}" in cluster[
        "worker_setup_commands"]


def test_cluster_yaml_installs_cud_with_the_fleet_extra_and_joins_workers_through_the_unit(
    cluster: dict[str, Any], tmp_path: Path
) -> None:
    assert any(re.search(r"\bmake install EXTRAS=fleet\b", c) for c in cluster["setup_commands"])
    assert cluster["file_mounts"]["~/cud"] == "."  # this clone, so every VM runs the same cud
    # A worker's Ray node is cud-fleet.service's: the launcher (re)starts the unit, never `ray start` itself.
    assert cluster["worker_start_ray_commands"] == ["sudo systemctl restart cud-fleet.service"]
    setup = cluster["worker_setup_commands"]
    assert "sudo systemctl enable cud-fleet.service" in setup
    # The worker's config: the head's address put in by the launcher, two seats on the displays it enables,
    # and cud-fleet's rights (submit, operate; never approve).
    (written,) = [c for c in setup if "worker.toml" in c]
    assert "$RAY_HEAD_IP" in written and "/etc/cud/cud.toml" in written
    text = (FLEET / "worker.toml").read_text().replace("@HEAD_IP@", "10.0.0.10")
    assert tomllib.loads(text)["fleet"]["address"] == "10.0.0.10:6379"
    config = load_cud_config(text, tmp_path)
    assert config.access.submit_users == config.access.operate_users == (FLEET_USER,)
    assert FLEET_USER not in config.access.approve_users
    numbers = [seat.display.lstrip(":") for seat in config.seats]
    (enable,) = [c for c in setup if "enable --now" in c]
    for unit in ("xvfb", "cud-bus"):
        assert all(f"{unit}@{n}" in enable.split() for n in numbers), enable
    drop_in = (FLEET / "seats.conf").read_text().splitlines()
    for key in ("Wants", "After"):
        for unit in ("xvfb", "cud-bus"):
            assert f"{key}=" + " ".join(f"{unit}@{n}.service" for n in numbers) in drop_in
    assert [seat.session_bus for seat in config.seats] == [f"unix:path=/run/cud-bus/{n}/bus" for n in numbers]


# -- KubeRay: examples/fleet/raycluster.yaml ------------------------------------------------------
@pytest.fixture(scope="module")
def kube() -> dict[str, dict[str, Any]]:
    docs = list(yaml.safe_load_all((FLEET / "raycluster.yaml").read_text()))
    return {doc["kind"]: doc for doc in docs}


def test_raycluster_yaml_is_valid_for_kuberays_crd(kube: dict[str, dict[str, Any]]) -> None:
    schema = crd_schema()
    cluster = kube["RayCluster"]
    assert cluster["apiVersion"] == "ray.io/v1"
    jsonschema.validate(cluster, schema)
    assert unknown_keys(cluster, schema) == []
    # The control: a misspelt key deep in a pod template, which Kubernetes would prune without a word.
    broken = copy.deepcopy(cluster)
    broken["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["securityContxt"] = {}
    assert unknown_keys(broken, schema) == ["spec.workerGroupSpecs[0].template.spec.containers[0].securityContxt"]


def _containers(cluster: dict[str, Any]) -> dict[str, dict[str, Any]]:
    (group,) = cluster["spec"]["workerGroupSpecs"]
    return {c["name"]: c for c in group["template"]["spec"]["containers"]}


def test_raycluster_workers_run_displays_a_daemon_and_the_fleet_node(kube: dict[str, dict[str, Any]],
                                                                      tmp_path: Path) -> None:
    cluster = kube["RayCluster"]
    (group,) = cluster["spec"]["workerGroupSpecs"]
    pod = group["template"]
    containers = _containers(cluster)
    ray_container = pod["spec"]["containers"][0]  # KubeRay's Ray container is the first
    assert ray_container["command"] == ["cud", "fleet", "join"] and "$(RAY_ADDRESS)" in ray_container["args"]
    assert pod["metadata"]["annotations"]["ray.io/overwrite-container-cmd"] == "true"
    assert ray_container["lifecycle"]["preStop"]["exec"]["command"][:3] == ["cud", "fleet", "leave"]
    assert pod["spec"]["terminationGracePeriodSeconds"] >= 300  # room to drain
    socket = ray_container["args"][ray_container["args"].index("--socket") + 1]
    daemon = containers["cud"]
    assert daemon["command"][:2] == ["cud", "run"] and daemon["command"][daemon["command"].index("--socket") + 1] == socket
    # The config both read: two seats on the pod's two Xvfbs; the Ray container's uid may submit and
    # operate, never approve, and reaches the socket (0660, the daemon's group) through its groups.
    config = load_cud_config(kube["ConfigMap"]["data"]["cud.toml"], tmp_path)
    displays = sorted(seat.display for seat in config.seats)
    assert displays == sorted(c["command"][1] for name, c in containers.items() if name.startswith("xvfb-"))
    assert config.access.submit_users == config.access.operate_users == (FLEET_USER,)
    assert FLEET_USER not in config.access.approve_users
    # ... the user the image has as uid 1001, which the Ray container runs as; the daemon is another.
    assert ray_container["securityContext"]["runAsUser"] == 1001 != daemon["securityContext"]["runAsUser"]
    assert daemon["securityContext"]["runAsGroup"] in pod["spec"]["securityContext"]["supplementalGroups"]
    # The Ray container sees neither the displays (cookie, sockets) nor the API key: only the daemon's socket.
    mounts = {m["name"] for m in ray_container["volumeMounts"]}
    assert not mounts & {"x-cookie", "x-sockets", "api-key", "cud-state"}
    assert {"x-cookie", "x-sockets", "api-key"} <= {m["name"] for m in daemon["volumeMounts"]}
    for name, container in containers.items():
        if name.startswith("xvfb-"):
            assert "-auth" in container["command"] and "tcp" in container["command"]  # -nolisten tcp
    # Kubernetes expands $(NAME) in a command and its args ($$ escapes a $): the only one meant is KubeRay's.
    for container in pod["spec"]["containers"] + pod["spec"]["initContainers"]:
        words = " ".join(container.get("command", []) + container.get("args", []))
        assert set(re.findall(r"(?<!\$)\$\(([A-Za-z_]\w*)\)", words)) <= {"RAY_ADDRESS"}, container["name"]


def test_raycluster_keeps_rays_ports_inside_the_cluster(kube: dict[str, dict[str, Any]]) -> None:
    assert kube["RayCluster"]["spec"]["authOptions"] == {"mode": "token"}
    head = kube["RayCluster"]["spec"]["headGroupSpec"]
    assert head["serviceType"] == "ClusterIP"
    assert head["rayStartParams"]["dashboard-host"] == "127.0.0.1"
    assert "0.0.0.0" not in (FLEET / "raycluster.yaml").read_text()
    assert set(kube) == {"RayCluster", "ConfigMap"}  # no Service, Ingress or Route of our own
