"""The chart's values mean what they mean in NVIDIA's chart: flags become env, configs become per-node configs,
switches switch, pod knobs reach every DaemonSet; and privileges follow what the configs can use."""

from __future__ import annotations

from typing import Any

import pytest

from gpuslice.config.load import parse_config_text
from tests.deploy.helm_chart import VALUES_DIR, daemonsets, env_of, main_container, render, values_file

FIELD_NODE_NAME = {"fieldRef": {"fieldPath": "spec.nodeName"}}


def _pod(objects: list[dict[str, Any]], component: str) -> dict[str, Any]:
    spec: dict[str, Any] = daemonsets(objects)[component]["spec"]["template"]["spec"]
    return spec


def _env(objects: list[dict[str, Any]], component: str) -> dict[str, Any]:
    return env_of(main_container(daemonsets(objects)[component]))


def _mounts(objects: list[dict[str, Any]], component: str) -> dict[str, str]:
    return {m["mountPath"]: m["name"] for m in main_container(daemonsets(objects)[component])["volumeMounts"]}


def _host_paths(objects: list[dict[str, Any]], component: str) -> dict[str, str]:
    return {v["name"]: v["hostPath"]["path"] for v in _pod(objects, component)["volumes"] if "hostPath" in v}


def _capabilities(objects: list[dict[str, Any]], component: str) -> list[str]:
    added: list[str] = main_container(daemonsets(objects)[component])["securityContext"]["capabilities"].get("add", [])
    return added


# NVIDIA's flag values and the env each becomes, in the device plugin ("plugin") and the label writer ("gfd").
FLAG_ENV = [
    ("compatWithCPUManager", True, "PASS_DEVICE_SPECS", "true", {"plugin"}),
    ("migStrategy", "mixed", "MIG_STRATEGY", "mixed", {"plugin", "gfd"}),
    ("failOnInitError", False, "FAIL_ON_INIT_ERROR", "false", {"plugin", "gfd"}),
    ("deviceListStrategy", "cdi-cri", "DEVICE_LIST_STRATEGY", "cdi-cri", {"plugin"}),
    ("deviceIDStrategy", "index", "DEVICE_ID_STRATEGY", "index", {"plugin"}),
    ("nvidiaDriverRoot", "/run/nvidia/driver", "NVIDIA_DRIVER_ROOT", "/run/nvidia/driver", {"plugin", "gfd"}),
    ("nvidiaDevRoot", "/run/nvidia/driver", "NVIDIA_DEV_ROOT", "/run/nvidia/driver", {"plugin"}),
    ("gdrcopyEnabled", True, "GDRCOPY_ENABLED", "true", {"plugin"}),
    ("gdsEnabled", True, "GDS_ENABLED", "true", {"plugin"}),
    ("mofedEnabled", False, "MOFED_ENABLED", "false", {"plugin"}),
    ("deviceDiscoveryStrategy", "nvml", "DEVICE_DISCOVERY_STRATEGY", "nvml", {"plugin"}),
    ("logVerbosity", 3, "VERBOSITY", "3", {"plugin"}),
    (
        "cdi.nvidiaHookPath",
        "/usr/local/nvidia/toolkit/nvidia-cdi-hook",
        "NVIDIA_CDI_HOOK_PATH",
        "/usr/local/nvidia/toolkit/nvidia-cdi-hook",
        {"plugin"},
    ),
    (
        "cdi.featureFlags",
        "disable-multiple-csv-devices,enable-chmod-hook",
        "CDI_FEATURE_FLAGS",
        "disable-multiple-csv-devices,enable-chmod-hook",
        {"plugin"},
    ),
    (
        "nvidiaDriverCapabilities",
        "compute,utility,video",
        "NVIDIA_DRIVER_CAPABILITIES",
        "compute,utility,video",
        {"plugin"},
    ),
    ("gfd.noTimestamp", True, "GFD_NO_TIMESTAMP", "true", {"gfd"}),
    ("gfd.sleepInterval", "30s", "GFD_SLEEP_INTERVAL", "30s", {"gfd"}),
]
COMPONENTS = {"plugin": "device-plugin", "gfd": "label-writer"}
# The variables that are there anyway, with the chart's values.
DEFAULT_ENV = {
    ("device-plugin", "NVIDIA_DRIVER_CAPABILITIES"): {"compute,utility"},
    ("label-writer", "NVIDIA_DRIVER_CAPABILITIES"): {"utility"},
}


@pytest.fixture(scope="module")
def every_flag() -> list[dict[str, Any]]:
    return render(values_file("every-flag.yaml"))


@pytest.mark.parametrize(("key", "value", "env", "text", "where"), FLAG_ENV, ids=[row[0] for row in FLAG_ENV])
def test_each_flag_becomes_its_env(
    every_flag: list[dict[str, Any]], key: str, value: Any, env: str, text: str, where: set[str]
) -> None:
    for short, component in COMPONENTS.items():
        expected = {text} if short in where else DEFAULT_ENV.get((component, env), {None})
        assert _env(every_flag, component).get(env) in expected, component
    # Unset (NVIDIA's null), the variable is absent: the config file decides.
    defaults = render({"gfd": {"enabled": True}})
    for component in COMPONENTS.values():
        assert _env(defaults, component).get(env) in DEFAULT_ENV.get((component, env), {None})


def test_the_dra_plugin_takes_the_plugin_flags() -> None:
    env = _env(render(values_file("every-flag.yaml") | {"dra": {"enabled": True}}), "dra-plugin")
    for _, _, name, text, where in FLAG_ENV:
        if "plugin" in where and name != "VERBOSITY":
            assert env[name] == text, name


def test_a_sleep_interval_in_seconds_is_a_duration() -> None:
    assert _env(render({"gfd": {"enabled": True, "sleepInterval": 90}}), "label-writer")["GFD_SLEEP_INTERVAL"] == "90s"


def test_one_config_for_every_node_by_default() -> None:
    objects = render({"gfd": {"enabled": True}})
    configmap = next(o for o in objects if o["kind"] == "ConfigMap")
    assert configmap["metadata"]["name"] == "gpuslice-config"
    assert "migStrategy: none" in configmap["data"]["config.yaml"]
    for component in ("device-plugin", "label-writer"):
        env = _env(objects, component)
        assert env["CONFIG_FILE"] == "/config/config.yaml"
        assert "CONFIG_FILE_SRCDIR" not in env
        assert "--config-file" in main_container(daemonsets(objects)[component])["args"]
    assert _pod(objects, "device-plugin")["automountServiceAccountToken"] is False
    assert not [o for o in objects if o["metadata"]["name"] == "gpuslice-node-config"]


@pytest.mark.parametrize("name", ["named-configs.yaml", "external-config.yaml"])
def test_named_configs_become_per_node_configs(name: str) -> None:
    values = values_file(name) | {"gfd": {"enabled": True}}
    objects = render(values)
    configmap_name = values["config"].get("name") or "gpuslice-config"
    for component in ("device-plugin", "label-writer"):
        container = main_container(daemonsets(objects)[component])
        env = env_of(container)
        # gpuslice's own watcher, with NVIDIA's config-manager settings: no sidecar, no init container.
        assert env["CONFIG_FILE_SRCDIR"] == "/config"
        assert env["NODE_LABEL"] == "nvidia.com/device-plugin.config"
        assert env["DEFAULT_CONFIG"] == values["config"]["default"]
        assert env["FALLBACK_STRATEGIES"] == "named,single"
        assert env["NODE_NAME"] == FIELD_NODE_NAME
        assert "CONFIG_FILE" not in env and "--config-file" not in container["args"]
        assert "initContainers" not in _pod(objects, component)
        volume = next(v for v in _pod(objects, component)["volumes"] if v["name"] == "config")
        assert volume["configMap"]["name"] == configmap_name
        assert _mounts(objects, component)["/config"] == "config"
    # Read-only RBAC on Nodes for both service accounts; the plugin now gets a token.
    role = next(o for o in objects if o["kind"] == "ClusterRole" and o["metadata"]["name"] == "gpuslice-node-config")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "watch"]}]
    binding = next(
        o for o in objects if o["kind"] == "ClusterRoleBinding" and o["metadata"]["name"] == "gpuslice-node-config"
    )
    assert {s["name"] for s in binding["subjects"]} == {"gpuslice-device-plugin", "gpuslice-label-writer"}
    assert _pod(objects, "device-plugin")["automountServiceAccountToken"] is True
    account = next(o for o in objects if o["kind"] == "ServiceAccount" and o["metadata"]["name"].endswith("plugin"))
    assert account["automountServiceAccountToken"] is True


def test_config_map_entries_are_the_configmap() -> None:
    values = values_file("named-configs.yaml")
    configmaps = [o for o in render(values) if o["kind"] == "ConfigMap"]
    assert len(configmaps) == 1
    assert configmaps[0]["data"] == values["config"]["map"]


def test_an_external_configmap_is_not_created() -> None:
    assert not [o for o in render(values_file("external-config.yaml")) if o["kind"] == "ConfigMap"]


def test_a_config_change_rolls_the_pods() -> None:
    def checksum(values: dict[str, Any]) -> str:
        annotations = daemonsets(render(values))["device-plugin"]["spec"]["template"]["metadata"]["annotations"]
        result: str = annotations["checksum/config"]
        return result

    values = values_file("named-configs.yaml")
    changed = {"config": {**values["config"], "map": {**values["config"]["map"], "whole": "version: v1\n"}}}
    assert checksum(values) != checksum(changed)


@pytest.mark.parametrize(
    ("values", "mig", "mps", "cdi"),
    [
        ({}, False, False, False),
        ({"migStrategy": "none"}, False, False, False),
        ({"migStrategy": "mixed"}, True, False, False),
        (values_file("named-configs.yaml"), True, False, False),  # its a100-mig entry
        (values_file("mps-config.yaml"), False, True, False),
        (values_file("mps-null.yaml"), False, False, False),  # `mps: null` shares nothing, as NVIDIA reads it
        (values_file("external-config.yaml"), True, True, True),  # unreadable here: anything is possible
        ({"deviceListStrategy": "envvar,cdi-annotations"}, False, False, True),
        (
            {"config": {"map": {"default": "version: v1\nflags:\n  plugin:\n    deviceListStrategy: [cdi-cri]\n"}}},
            False,
            False,
            True,
        ),
    ],
)
def test_privileges_follow_what_the_configs_can_use(values: dict[str, Any], mig: bool, mps: bool, cdi: bool) -> None:
    objects = render(values | {"gfd": {"enabled": True}})
    plugin_env, writer_env = _env(objects, "device-plugin"), _env(objects, "label-writer")
    assert ("SYS_ADMIN" in _capabilities(objects, "device-plugin")) == (mig or mps)
    assert (plugin_env.get("NVIDIA_MIG_MONITOR_DEVICES") == "all") == mig
    assert (writer_env.get("NVIDIA_MIG_MONITOR_DEVICES") == "all") == mig
    assert ("SYS_ADMIN" in _capabilities(objects, "label-writer")) == mig
    writer_context = main_container(daemonsets(objects)["label-writer"])["securityContext"]
    assert writer_context["runAsUser"] == (0 if mig else 65532)
    assert bool(_pod(objects, "device-plugin").get("hostPID")) == mps
    mps_root = ((values.get("mps") or {}).get("root")) or "/run/nvidia/mps"
    assert (plugin_env.get("MPS_ROOT") == mps_root) == mps
    assert (_mounts(objects, "device-plugin").get(mps_root) == "mps-root") == mps
    assert (_mounts(objects, "device-plugin").get("/dev/shm") == "mps-shm") == mps
    if mps:
        assert _host_paths(objects, "device-plugin")["mps-shm"] == f"{mps_root}/shm"
    assert ("/var/run/cdi" in _mounts(objects, "device-plugin")) == cdi


def test_mps_host_pid_can_be_turned_off() -> None:
    objects = render(values_file("mps-config.yaml") | {"mps": {"root": "/run/nvidia/mps", "enableHostPID": False}})
    assert "hostPID" not in _pod(objects, "device-plugin")


def test_the_driver_root_is_mounted_read_only() -> None:
    objects = render({"nvidiaDriverRoot": "/run/nvidia/driver/", "gfd": {"enabled": True}})
    for component in ("device-plugin", "label-writer"):
        mounts = main_container(daemonsets(objects)[component])["volumeMounts"]
        driver = {m["mountPath"] for m in mounts if m["name"] == "driver-root" and m["readOnly"]}
        assert driver == {"/driver-root", "/run/nvidia/driver"}
        assert _host_paths(objects, component)["driver-root"] == "/run/nvidia/driver"
    # The host's / is mounted at /driver-root only (never over the container's /).
    slash = main_container(daemonsets(render({"nvidiaDriverRoot": "/"}))["device-plugin"])["volumeMounts"]
    assert [m["mountPath"] for m in slash if m["name"] == "driver-root"] == ["/driver-root"]


def test_the_switches() -> None:
    assert set(daemonsets(render({}))) == {"device-plugin"}  # gfd.enabled is false by default, as NVIDIA's
    assert set(daemonsets(render({"gfd": {"enabled": True}}))) == {"device-plugin", "label-writer"}
    assert daemonsets(render({"devicePlugin": {"enabled": False}})) == {}
    no_metrics = render({"metrics": {"enabled": False}, "networkPolicy": {"enabled": False}})
    assert {o["kind"] for o in no_metrics} == {"ConfigMap", "DaemonSet", "ServiceAccount"}


def test_extra_device_plugin_env_replaces_the_charts() -> None:
    extra = [{"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute,utility,video"}, {"name": "X", "value": "1"}]
    env = _env(render({"devicePlugin": {"containers": {"main": {"env": extra}}}}), "device-plugin")
    assert env["NVIDIA_DRIVER_CAPABILITIES"] == "compute,utility,video"
    assert env["X"] == "1"
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all"


def test_pod_knobs_reach_every_daemonset() -> None:
    values = values_file("pod-knobs.yaml")
    for dra in (False, True):
        objects = render(values | {"dra": {"enabled": dra}})
        found = daemonsets(objects)
        assert set(found) == ({"dra-plugin", "label-writer"} if dra else {"device-plugin", "label-writer"})
        for component, daemonset in found.items():
            template = daemonset["spec"]["template"]
            pod = template["spec"]
            assert daemonset["spec"]["updateStrategy"] == values["updateStrategy"], component
            assert template["metadata"]["annotations"]["example.com/team"] == "gpu"
            assert pod["imagePullSecrets"] == values["imagePullSecrets"]
            assert pod["securityContext"] == values["podSecurityContext"]
            assert pod["nodeSelector"] == values["nodeSelector"]
            assert pod["affinity"] == values["affinity"]  # a list replaces the default's terms
            assert pod["tolerations"] == values["tolerations"]
            assert pod["priorityClassName"] == "gpu-critical"
            assert pod["runtimeClassName"] == "nvidia"
            container = main_container(daemonset)
            assert container["securityContext"] == values["securityContext"]
            assert container["resources"] == values["resources"]


def test_per_component_resources_win() -> None:
    resources = {"requests": {"cpu": "1"}}
    values = {
        "resources": {"requests": {"cpu": "2"}},
        "devicePlugin": {"resources": resources},
        "gfd": {"enabled": True},
    }
    objects = render(values)
    assert main_container(daemonsets(objects)["device-plugin"])["resources"] == resources
    assert main_container(daemonsets(objects)["label-writer"])["resources"] == values["resources"]


def test_nvidia_defaults_mean_nvidias_defaults() -> None:
    pod = _pod(render(values_file("nvidia-defaults.yaml")), "device-plugin")
    assert pod["priorityClassName"] == "system-node-critical"
    assert [t["key"] for t in pod["tolerations"]] == ["CriticalAddonsOnly", "nvidia.com/gpu"]
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert [term["matchExpressions"][0]["key"] for term in terms] == [
        "feature.node.kubernetes.io/pci-10de.present",
        "feature.node.kubernetes.io/cpu-model.vendor_id",
        "nvidia.com/gpu.present",
    ]
    assert "runtimeClassName" not in pod


def test_names_and_selectors() -> None:
    objects = render({"fullnameOverride": "gpus", "selectorLabelsOverride": {"team": "ml"}, "gfd": {"enabled": True}})
    found = daemonsets(objects)
    assert {d["metadata"]["name"] for d in found.values()} == {"gpus-device-plugin", "gpus-label-writer"}
    for component, daemonset in found.items():
        selector = daemonset["spec"]["selector"]["matchLabels"]
        # The component keeps two DaemonSets from selecting each other's pods.
        assert selector == {"team": "ml", "app.kubernetes.io/component": component}
        assert selector.items() <= daemonset["spec"]["template"]["metadata"]["labels"].items()
    service = next(o for o in objects if o["kind"] == "Service")
    assert service["spec"]["selector"] == found["device-plugin"]["spec"]["selector"]["matchLabels"]
    overridden = render({"namespaceOverride": "gpu-operator"})
    assert {o["metadata"].get("namespace") for o in overridden} == {"gpu-operator"}


def test_dra_replaces_the_device_plugin() -> None:
    objects = render(values_file("dra.yaml"))
    env = _env(objects, "dra-plugin")
    assert env["DRIVER_NAME"] == "gpu.gpuslice.io"
    assert env["RESOURCE_API_VERSION"] == "v1"
    assert env["CONFIG_FILE"] == "/config/config.yaml"
    assert env["MIG_STRATEGY"] == "mixed"
    assert "SYS_ADMIN" in _capabilities(objects, "dra-plugin")
    classes = {o["metadata"]["name"]: o for o in objects if o["kind"] == "DeviceClass"}
    assert set(classes) == {"gpu.gpuslice.io", "mig.gpuslice.io"}
    assert {o["apiVersion"] for o in classes.values()} == {"resource.k8s.io/v1"}
    role = next(o for o in objects if o["kind"] == "ClusterRole" and o["metadata"]["name"] == "gpuslice-dra-plugin")
    assert {r["resources"][0]: r["verbs"] for r in role["rules"]}["resourceclaims"] == ["get", "list", "watch"]
    assert set(_host_paths(objects, "dra-plugin").values()) >= {
        "/var/lib/kubelet/plugins_registry",
        "/var/lib/kubelet/plugins/gpu.gpuslice.io",
        "/var/run/cdi",
    }
    box = main_container(daemonsets(objects)["dra-plugin"])
    port = int(box["args"][box["args"].index("--metrics-port") + 1])
    assert port == 9402 and {p["name"]: p["containerPort"] for p in box["ports"]} == {"metrics": port}
    assert {box[probe]["httpGet"]["path"] for probe in ("readinessProbe", "livenessProbe")} == {"/readyz", "/healthz"}
    service = next(o for o in objects if o["kind"] == "Service")
    assert service["spec"]["selector"] == daemonsets(objects)["dra-plugin"]["spec"]["selector"]["matchLabels"]
    beta = render(values_file("dra-v1beta2.yaml"))
    assert {o["apiVersion"] for o in beta if o["kind"] == "DeviceClass"} == {"resource.k8s.io/v1beta2"}
    assert _env(beta, "dra-plugin")["RESOURCE_API_VERSION"] == "v1beta2"


@pytest.mark.parametrize("name", sorted(p.name for p in VALUES_DIR.glob("*.yaml")))
def test_config_map_entries_are_configs_gpuslice_loads(name: str) -> None:
    # Each entry becomes a file that the plugin loads as it loads any NVIDIA v1 config file.
    configs = (values_file(name).get("config") or {}).get("map") or {}
    for key, text in configs.items():
        parse_config_text(text, f"{name}: config.map.{key}")
    default = next(o for o in render({}) if o["kind"] == "ConfigMap")["data"]["config.yaml"]
    assert parse_config_text(default).config.flags.mig_strategy == "none"
