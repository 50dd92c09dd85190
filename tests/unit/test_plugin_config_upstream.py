"""We test that NVIDIA's own device plugin config parser (k8s-device-plugin's api/config/v1 at the
release the image contract pins, built by hack/plugin_config_check.py from a clone of that
repository, plus the checks its main makes before starting) and ocp-gpu agree:

- every config ocp-gpu renders from a policy (resourceConfig's time-slicing, renames, MIG
  strategies) is accepted;
- on admins' configs (devicePlugin.config.name): MPS and time-slicing configs
  `planning.config_maps.plugin_config_problem` accepts, NVIDIA's parser accepts (with the
  sharing strategy the node agent's GFD simulation labels), and every one it refuses (replicas
  below 2, a resource without a name, MPS with the mixed MIG strategy, not a v1 config), NVIDIA's
  refuses too.

The comparisons need the clone (`git clone --bare https://github.com/NVIDIA/k8s-device-plugin
.cache/upstream/NVIDIA+k8s-device-plugin`, or $OCP_GPU_UPSTREAM) and Go: the Go module proxy
does not serve k8s-device-plugin, so without the clone these tests skip, naming it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from ocp_gpu.model.policy import policy_parser
from ocp_gpu.planning import config_maps
from ocp_gpu.rendering.operands import plugin_config
from ocp_gpu_harness import node_agent
from tests import hack_scripts

checker = hack_scripts.load("plugin_config_check")

needs_clone = pytest.mark.skipif(
    checker.mirror() is None,
    reason="no clone of NVIDIA/k8s-device-plugin under $OCP_GPU_UPSTREAM or .cache/upstream "
    "(git clone --bare https://github.com/NVIDIA/k8s-device-plugin .cache/upstream/NVIDIA+k8s-device-plugin)",
)

RENDERED_POLICIES = {
    "default": {},
    "no CDI": {"cdi": {"enabled": False}},
    "time-slicing": {"devicePlugin": {"resourceConfig": "gpu:sharedgpu:4"}},
    "MIG mixed renames": {
        "devicePlugin": {"migStrategy": "mixed", "resourceConfig": "mig-3g.20gb:small:2,mig-1g.5gb:gpu:1"}
    },
    "every option": {
        "devicePlugin": {
            "migStrategy": "single",
            "failOnInitError": False,
            "compatWithCPUManager": True,
            "deviceListStrategy": "volume-mounts",
            "deviceIDStrategy": "index",
            "resourceConfig": "gpu:sharedgpu:2",
        }
    },
}


def _mps(replicas: Any, **flags: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "version": "v1",
        "sharing": {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": replicas}]}},
    }
    if flags:
        config["flags"] = flags
    return config


# (admin's config, the sharing NVIDIA's parser reads when accepted, or None when refused)
ADMIN_CONFIGS: dict[str, tuple[Any, str | None]] = {
    "mps x4": (_mps(4), "mps"),
    "mps x2 single": (_mps(2, migStrategy="single"), "mps"),
    "time-slicing x2": (
        {
            "version": "v1",
            "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}},
        },
        "time-slicing",
    ),
    "no sharing": ({"version": "v1"}, "none"),
    "mps x1": (_mps(1), None),
    "mps without a name": (
        {"version": "v1", "sharing": {"mps": {"resources": [{"replicas": 4}]}}},
        None,
    ),
    "mps with mixed MIG": (_mps(4, migStrategy="mixed"), None),
    "version v2": ({"version": "v2"}, None),
}


def _write(tmp_path: Path, name: str, config: Any) -> Path:
    path = tmp_path / (name.replace(" ", "-") + ".yaml")
    path.write_text(yaml.safe_dump(config))
    return path


@needs_clone
def test_every_rendered_config_is_accepted_by_nvidias_parser(tmp_path: Path) -> None:
    files = [
        _write(
            tmp_path, name, plugin_config.render_plugin_config(policy_parser.parse_policy(spec).device_plugin)
        )
        for name, spec in RENDERED_POLICIES.items()
    ]
    verdicts = checker.check(files)
    assert [v["file"] for v in verdicts] == [str(f) for f in files]
    assert [v for v in verdicts if not v["accepted"]] == []


def test_our_verdicts_on_admin_configs() -> None:
    # Runs without the clone: the verdicts the test below checks against NVIDIA's parser.
    for name, (config, sharing) in ADMIN_CONFIGS.items():
        ours = config_maps.plugin_config_problem("plugin-configs", {"key": yaml.safe_dump(config)}, "none")
        assert (ours is None) is (sharing is not None), (name, ours)
        if ours is not None:
            assert ours.field == "spec.devicePlugin.config.name"
            assert "ConfigMap 'plugin-configs' key 'key'" in ours.message and ours.fix
    # The policy's MIG strategy counts where the config names none (the plugin's MIG_STRATEGY env).
    mps = {"key": yaml.safe_dump(_mps(4))}
    problem = config_maps.plugin_config_problem("plugin-configs", mps, "mixed")
    assert problem is not None and "MPS sharing with the mixed MIG strategy" in problem.message


@needs_clone
def test_admin_configs_get_the_same_verdict_from_both(tmp_path: Path) -> None:
    files = {name: _write(tmp_path, name, config) for name, (config, _) in ADMIN_CONFIGS.items()}
    verdicts = {v["file"]: v for v in checker.check(list(files.values()))}
    for name, (config, sharing) in ADMIN_CONFIGS.items():
        upstream = verdicts[str(files[name])]
        ours = config_maps.plugin_config_problem("plugin-configs", {"key": yaml.safe_dump(config)}, "none")
        assert upstream["accepted"] is (sharing is not None), (name, upstream)
        assert (ours is None) is (sharing is not None), (name, ours)
        if sharing is not None:
            assert upstream["sharing"] == sharing, name
            # The node agent's GFD simulation labels the strategy NVIDIA's parser reads.
            assert node_agent.sharing_strategy(config) == sharing, name


def test_only_the_keys_a_config_manager_picks_are_checked() -> None:
    # One ConfigMap for several operands (the DCGM exporter's metrics beside the plugin's configs):
    # the plugin reads only the key its config-manager copies (the default, or a node's label).
    data = {"any": yaml.safe_dump(_mps(2)), "dcgm-metrics.csv": "DCGM_FI_DEV_GPU_UTIL, gauge, utilization"}
    assert config_maps.plugin_config_problem("shared", data, "none", {"any"}) is None
    problem = config_maps.plugin_config_problem("shared", data, "none", {"any", "dcgm-metrics.csv"})
    assert problem is not None and "key 'dcgm-metrics.csv'" in problem.message
    # A picked key that is missing is that node's config-manager's affair, not a config to refuse.
    assert config_maps.plugin_config_problem("shared", data, "none", {"any", "missing"}) is None
