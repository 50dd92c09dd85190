"""We test these aspects of image resolution (model/images.py):

- the environment variable names are NVIDIA's (as in its CSV), one per component;
- each rule: all three parts set, a digest version, a full reference in `image` alone,
  only the version set (the seed's patch, over a tag and over an OLM digest), nothing
  set, the other partial combinations, `image` carrying its own path;
- every unresolvable case is a PolicyProblem naming the field (or the variable) to set,
  never an invalid reference (NVIDIA's `/:570.x` among them);
- driver_image_for: OS and precompiled suffixes, digests unchanged, invalid results raise;
- hypothesis: whatever the inputs, the result is a parseable reference or a problem,
  and a resolved reference given back as `image` resolves to itself.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ocp_gpu.model import images
from ocp_gpu.model.policy import policy_spec
from ocp_gpu.model.policy.policy_problems import PolicyProblem

DIGEST = "sha256:" + "0123456789abcdef" * 4
TAGGED_DEFAULT = {"DRIVER_IMAGE": "nvcr.io/nvidia/driver:550.90.07"}
DIGEST_DEFAULT = {"DRIVER_IMAGE": f"nvcr.io/nvidia/driver@{DIGEST}"}
PORT_DEFAULT = {"DRIVER_IMAGE": "registry.local:5000/mirror/nvidia/driver:550.90.07"}
NO_DEFAULT: dict[str, str] = {}


def source(repository: str = "", name: str = "", version: str = "") -> policy_spec.ImageSpec:
    return policy_spec.ImageSpec(repository=repository, name=name, version=version)


def test_environment_names_are_nvidias() -> None:
    assert images.DEFAULT_IMAGE_ENV == {
        "driver": "DRIVER_IMAGE",
        "driver.manager": "DRIVER_MANAGER_IMAGE",
        "toolkit": "CONTAINER_TOOLKIT_IMAGE",
        "devicePlugin": "DEVICE_PLUGIN_IMAGE",
        "dcgm": "DCGM_IMAGE",
        "dcgmExporter": "DCGM_EXPORTER_IMAGE",
        "gfd": "GFD_IMAGE",
        "validator": "VALIDATOR_IMAGE",
        "migManager": "MIG_MANAGER_IMAGE",
        "draDriver": "DRA_DRIVER_IMAGE",
        "vfioManager": "VFIO_MANAGER_IMAGE",
        "vfioManager.driverManager": "DRIVER_MANAGER_IMAGE",
        "sandboxDevicePlugin": "SANDBOX_DEVICE_PLUGIN_IMAGE",
        # ours: NVIDIA's CSV names no vGPU manager image (it publishes none); never set by ours either
        "vgpuManager": "VGPU_MANAGER_IMAGE",
        "vgpuManager.driverManager": "DRIVER_MANAGER_IMAGE",
        "vgpuDeviceManager": "VGPU_DEVICE_MANAGER_IMAGE",
        "nodeStatusExporter": "VALIDATOR_IMAGE",
        "gds": "GDS_IMAGE",
        "gdrcopy": "GDRCOPY_IMAGE",
    }


RESOLVED = {
    "all three parts": (
        source("nvcr.io/nvidia", "driver", "570.124.06"),
        NO_DEFAULT,
        "nvcr.io/nvidia/driver:570.124.06",
    ),
    "digest version": (
        source("nvcr.io/nvidia", "driver", DIGEST),
        NO_DEFAULT,
        f"nvcr.io/nvidia/driver@{DIGEST}",
    ),
    "full reference in image alone": (
        source(name="quay.io/me/driver:570.124.06"),
        NO_DEFAULT,
        "quay.io/me/driver:570.124.06",
    ),
    "pinned reference in image alone": (
        source(name=f"quay.io/me/driver@{DIGEST}"),
        NO_DEFAULT,
        f"quay.io/me/driver@{DIGEST}",
    ),
    "only version, over a tag (the seed's patch)": (
        source(version="510.85.02"),
        TAGGED_DEFAULT,
        "nvcr.io/nvidia/driver:510.85.02",
    ),
    "only version, over an OLM digest": (
        source(version="570.124.06"),
        DIGEST_DEFAULT,
        "nvcr.io/nvidia/driver:570.124.06",
    ),
    "only a digest version, over a tag": (
        source(version=DIGEST),
        TAGGED_DEFAULT,
        f"nvcr.io/nvidia/driver@{DIGEST}",
    ),
    "nothing set": (source(), TAGGED_DEFAULT, "nvcr.io/nvidia/driver:550.90.07"),
    "nothing set, digest default": (source(), DIGEST_DEFAULT, f"nvcr.io/nvidia/driver@{DIGEST}"),
    "a mirror repository": (
        source("mirror.example.com/nvidia"),
        TAGGED_DEFAULT,
        "mirror.example.com/nvidia/driver:550.90.07",
    ),
    "a mirror repository and version": (
        source("mirror.example.com/nvidia", version="570.124.06"),
        DIGEST_DEFAULT,
        "mirror.example.com/nvidia/driver:570.124.06",
    ),
    "a renamed image": (
        source(name="driver-custom"),
        TAGGED_DEFAULT,
        "nvcr.io/nvidia/driver-custom:550.90.07",
    ),
    "image and version, repository from the default": (
        source(name="driver", version="570.124.06"),
        DIGEST_DEFAULT,
        "nvcr.io/nvidia/driver:570.124.06",
    ),
    "image with its path and a version": (
        source(name="quay.io/me/driver", version="570.124.06"),
        NO_DEFAULT,
        "quay.io/me/driver:570.124.06",
    ),
    "registry with a port": (
        source(version="570.124.06"),
        PORT_DEFAULT,
        "registry.local:5000/mirror/nvidia/driver:570.124.06",
    ),
    "blanks around values": (
        source(" nvcr.io/nvidia ", " driver ", " 570.124.06 "),
        NO_DEFAULT,
        "nvcr.io/nvidia/driver:570.124.06",
    ),
}


@pytest.mark.parametrize(("spec", "env", "expected"), RESOLVED.values(), ids=RESOLVED.keys())
def test_resolved(spec: policy_spec.ImageSpec, env: dict[str, str], expected: str) -> None:
    assert images.resolve_image(spec, component="driver", env=env) == expected


UNRESOLVABLE = {
    "nothing set, no default": (source(), NO_DEFAULT, "spec.driver.repository", ["DRIVER_IMAGE"]),
    "only version, no default (NVIDIA's /:570.x)": (
        source(version="570.124.06"),
        NO_DEFAULT,
        "spec.driver.repository",
        ["DRIVER_IMAGE", "spec.driver.image"],
    ),
    "repository and image, no version, no default": (
        source("nvcr.io/nvidia", "driver"),
        NO_DEFAULT,
        "spec.driver.version",
        ["DRIVER_IMAGE"],
    ),
    "default without a tag, no version": (
        source(),
        {"DRIVER_IMAGE": "nvcr.io/nvidia/driver"},
        "spec.driver.version",
        ["has no version"],
    ),
    "default is garbage": (
        source(version="570"),
        {"DRIVER_IMAGE": "not a reference"},
        "spec.driver",
        ["DRIVER_IMAGE"],
    ),
    "repository ends with a slash": (
        source("nvcr.io/nvidia/", version="570"),
        TAGGED_DEFAULT,
        "spec.driver.repository",
        [],
    ),
    "repository is only a slash": (source("/", "driver", "570"), NO_DEFAULT, "spec.driver.repository", []),
    "uppercase image name": (source("nvcr.io/nvidia", "Driver", "570"), NO_DEFAULT, "spec.driver.image", []),
    "version with a blank inside": (source(version="570 beta"), TAGGED_DEFAULT, "spec.driver.version", []),
    "version with a plus": (source(version="570+1"), TAGGED_DEFAULT, "spec.driver.version", []),
    "short digest": (
        source(version="sha256:abc"),
        TAGGED_DEFAULT,
        "spec.driver.version",
        ["sha256:<64 hex digits>"],
    ),
    "image alone with a tag but no registry": (
        source(name="driver:570"),
        NO_DEFAULT,
        "spec.driver.image",
        [],
    ),
    "image carries a tag and version is set": (
        source("nvcr.io/nvidia", "driver:570", "570.1"),
        NO_DEFAULT,
        "spec.driver.image",
        [],
    ),
    "image alone, not a reference": (
        source(name="nvcr.io/nvidia/Driver:570"),
        NO_DEFAULT,
        "spec.driver.image",
        [],
    ),
}


@pytest.mark.parametrize(("spec", "env", "field", "mentions"), UNRESOLVABLE.values(), ids=UNRESOLVABLE.keys())
def test_unresolvable_names_the_field(
    spec: policy_spec.ImageSpec, env: dict[str, str], field: str, mentions: list[str]
) -> None:
    problem = images.resolve_image(spec, component="driver", env=env)
    assert isinstance(problem, PolicyProblem)
    assert problem.field == field
    for mention in mentions:
        assert mention in f"{problem.message} {problem.fix}"


def test_problems_name_the_components_own_variable() -> None:
    problem = images.resolve_image(
        source(), component="dcgmExporter", env={"DRIVER_IMAGE": "nvcr.io/nvidia/driver:1"}
    )
    assert isinstance(problem, PolicyProblem)
    assert problem.field == "spec.dcgmExporter.repository"
    assert "DCGM_EXPORTER_IMAGE" in problem.message and "DCGM_EXPORTER_IMAGE" in problem.fix


def test_node_status_exporter_runs_the_validator_image() -> None:
    env = {"VALIDATOR_IMAGE": "quay.io/ocp-gpu/ocp-gpu:0.1.0"}
    assert images.resolve_image(source(), component="nodeStatusExporter", env=env) == env["VALIDATOR_IMAGE"]


DRIVER_TAGS = {
    "vanilla ubuntu": (
        "nvcr.io/nvidia/driver:570.124.06",
        "ubuntu22.04",
        "nvcr.io/nvidia/driver:570.124.06-ubuntu22.04",
    ),
    "rhcos via its rhel version": (
        "nvcr.io/nvidia/driver:570.124.06",
        "rhel9.4",
        "nvcr.io/nvidia/driver:570.124.06-rhel9.4",
    ),
    "precompiled": (
        "nvcr.io/nvidia/driver:570",
        images.precompiled_os_tag("5.15.0-1043-azure", "ubuntu22.04"),
        "nvcr.io/nvidia/driver:570-5.15.0-1043-azure-ubuntu22.04",
    ),
    "registry with a port": ("localhost:5000/driver:570", "rhel9.6", "localhost:5000/driver:570-rhel9.6"),
    "digest unchanged": (f"nvcr.io/nvidia/driver@{DIGEST}", "rhel9.4", f"nvcr.io/nvidia/driver@{DIGEST}"),
    "no os suffix": ("nvcr.io/nvidia/driver:570.124.06", "", "nvcr.io/nvidia/driver:570.124.06"),
}


@pytest.mark.parametrize(("base", "os_tag", "expected"), DRIVER_TAGS.values(), ids=DRIVER_TAGS.keys())
def test_driver_image_for(base: str, os_tag: str, expected: str) -> None:
    assert images.driver_image_for(images.ImageRef(base), os_tag) == expected


BAD_DRIVER_TAGS = {
    "no tag to extend": ("nvcr.io/nvidia/driver", "rhel9.4"),
    "suffix not allowed in a tag": ("nvcr.io/nvidia/driver:570", "6.1.0+rpt-rpi-v8-debian12"),
    "tag too long": ("nvcr.io/nvidia/driver:570", "x" * 130),
    "not a reference": ("Not A Reference", "rhel9.4"),
}


@pytest.mark.parametrize(("base", "os_tag"), BAD_DRIVER_TAGS.values(), ids=BAD_DRIVER_TAGS.keys())
def test_driver_image_for_refuses_invalid_results(base: str, os_tag: str) -> None:
    with pytest.raises(ValueError):
        images.driver_image_for(images.ImageRef(base), os_tag)


REFERENCES = {
    "nvcr.io/nvidia/driver:570.124.06": images.Reference("nvcr.io/nvidia", "driver", "570.124.06", None),
    f"nvcr.io/nvidia/cloud-native/k8s-driver-manager@{DIGEST}": images.Reference(
        "nvcr.io/nvidia/cloud-native", "k8s-driver-manager", None, DIGEST
    ),
    f"quay.io/a/b:1@{DIGEST}": images.Reference("quay.io/a", "b", "1", DIGEST),
    "busybox": images.Reference("", "busybox", None, None),
}


@pytest.mark.parametrize(("text", "expected"), REFERENCES.items(), ids=list(REFERENCES))
def test_parse_reference(text: str, expected: images.Reference) -> None:
    assert images.parse_reference(text) == expected


_PART = st.sampled_from(
    [
        "",
        "nvcr.io/nvidia",
        "driver",
        "570.124.06",
        DIGEST,
        "/",
        "Driver",
        "a b",
        "x:1",
        "q.io/a/b:2",
        "sha256:1",
        "-",
    ]
)
_ENV = st.sampled_from(
    [NO_DEFAULT, TAGGED_DEFAULT, DIGEST_DEFAULT, PORT_DEFAULT, {"DRIVER_IMAGE": "junk junk"}]
)


@given(_PART, _PART, _PART, _ENV)
def test_result_is_a_reference_or_a_problem(
    repository: str, name: str, version: str, env: dict[str, str]
) -> None:
    resolved = images.resolve_image(source(repository, name, version), component="driver", env=env)
    if isinstance(resolved, PolicyProblem):
        assert resolved.field.startswith("spec.driver")
    else:
        assert images.parse_reference(resolved) is not None
        assert "/" in resolved
        # Given back as a full reference, it resolves to itself.
        assert images.resolve_image(source(name=resolved), component="driver", env=NO_DEFAULT) == resolved


# --- the release's defaults under the operator's environment (model/releases.py) ----------------


def test_release_defaults_fill_only_unset_image_variables() -> None:
    from ocp_gpu.model import releases

    env = releases.with_release_defaults(
        {"DRIVER_IMAGE": "mirror.example/driver:1", "GFD_IMAGE": "  ", "OTHER": "x"}
    )
    assert env["DRIVER_IMAGE"] == "mirror.example/driver:1"  # set: the environment wins
    assert env["GFD_IMAGE"] == "  "  # set but blank: kept, and reported by name (model/images)
    # unset: the release's, as the OLM bundle and the Helm chart set it (by digest where pinned)
    assert env["DCGM_IMAGE"] == releases.installed_images()["DCGM_IMAGE"]
    assert env["OTHER"] == "x"
    # by tag on request (`ocp-gpu render --tags`); what is set still wins
    tagged = releases.with_release_defaults({"DRIVER_IMAGE": "mirror.example/driver:1"}, by_tag=True)
    assert {name: tagged[name] for name in releases.RELEASE_IMAGES} == {
        **releases.RELEASE_IMAGES,
        "DRIVER_IMAGE": "mirror.example/driver:1",
    }
    # The validator and the node status exporter run our commands: the operator's own image.
    assert env["VALIDATOR_IMAGE"] == env["OPERATOR_IMAGE"] == releases.OPERATOR_IMAGE
    assert tagged["VALIDATOR_IMAGE"] == releases.OPERATOR_IMAGE
    mirrored = releases.with_release_defaults({"OPERATOR_IMAGE": "mirror.example/ocp-gpu@sha256:" + "a" * 64})
    assert mirrored["VALIDATOR_IMAGE"] == mirrored["OPERATOR_IMAGE"]  # a mirrored operator image moves them
    assert releases.with_release_defaults({"VALIDATOR_IMAGE": "x.example/v:1"})["VALIDATOR_IMAGE"] == (
        "x.example/v:1"  # NVIDIA's variable, set, still wins
    )
    # With none set, every component resolves (no InvalidSpec for a bare `ocp-gpu run`).
    from ocp_gpu.model.policy import policy_checks, policy_parser

    bare = releases.with_release_defaults({})
    assert not [
        p for p in policy_checks.validate_policy(policy_parser.parse_policy({}), bare) if "IMAGE" in p.message
    ]


def test_readme_names_every_image_variable_with_its_release_default() -> None:
    from pathlib import Path

    from ocp_gpu.model import releases

    readme = (Path(__file__).resolve().parents[2] / "docs" / "images.md").read_text()
    for name, image in releases.RELEASE_IMAGES.items():
        assert f"| `{name}` |" in readme and f"| `{image}` |" in readme, name
