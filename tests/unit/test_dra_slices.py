"""We test these aspects of the SIMULATION of NVIDIA's DRA kubelet plugin's ResourceSlices
(ocp_gpu_harness/dra_slices.py), no API:

- a whole GPU per device, `gpu-<minor>`, with NVIDIA's attribute names and kinds (strings,
  semver versions), the standard pciBusID attribute and `memory` in bytes;
- versions as the plugin's semver parse writes them ("9.0" -> "9.0.0"), the CUDA driver
  version of the driver branch, the driver version read from a driver image tag (none from
  a digest);
- under MIG only MIG devices, named `gpu-<minor>-mig-<profile>-<GI profile id>-<start>`, each
  GPU holding its share, placements that never overlap on a GPU, one memorySlice capacity per
  memory slice spanned; the 1g profile with two memory slices takes NVML's REV2 profile id;
- the slice: driver gpu.nvidia.com, one pool named after the node, owned by the Node, named
  as the plugin's slice controller names it;
- the compute-domain plugin's slice: driver compute-domain.nvidia.com, IMEX channel 0 and the
  daemon with NVIDIA's `type` and `id` attributes.
"""

from __future__ import annotations

import pytest

from ocp_gpu_harness import dra_slices


def test_whole_gpus() -> None:
    found = dra_slices.devices("n1", "NVIDIA-H100-80GB-HBM3", 2, None, "580.95.05")
    assert [d["name"] for d in found] == ["gpu-0", "gpu-1"]
    gpu = found[0]
    assert gpu["attributes"] == {
        "type": {"string": "gpu"},
        "uuid": {"string": gpu["attributes"]["uuid"]["string"]},
        "productName": {"string": "NVIDIA H100 80GB HBM3"},
        "brand": {"string": "Nvidia"},
        "architecture": {"string": "Hopper"},
        "cudaComputeCapability": {"version": "9.0.0"},
        "driverVersion": {"version": "580.95.5"},
        "cudaDriverVersion": {"version": "13.0.0"},
        "resource.kubernetes.io/pciBusID": {"string": "0000:18:00.0"},
    }
    assert gpu["capacity"] == {"memory": {"value": "81559Mi"}}
    uuids = {d["attributes"]["uuid"]["string"] for d in found}
    assert len(uuids) == 2 and all(u.startswith("GPU-") for u in uuids)
    # the same node and GPU: the same UUID (a restarted agent announces the same devices)
    assert dra_slices.devices("n1", "NVIDIA-H100-80GB-HBM3", 2, None, "580.95.05") == found
    assert dra_slices.devices("n2", "NVIDIA-H100-80GB-HBM3", 2, None, "580.95.05") != found


@pytest.mark.parametrize(
    ("image", "version"),
    [
        ("nvcr.io/nvidia/driver:550.54.15-rhcos4.16", "550.54.15"),
        ("nvcr.io/nvidia/driver:580.95.05-ubuntu22.04", "580.95.05"),
        ("registry.local:5000/driver:570.86.10", "570.86.10"),
        ("nvcr.io/nvidia/driver@sha256:" + "a" * 64, None),
        ("nvcr.io/nvidia/driver", None),
        ("nvcr.io/nvidia/driver:latest", None),
    ],
)
def test_driver_version_of_an_image(image: str, version: str | None) -> None:
    assert dra_slices.driver_version_of(image) == version


def test_mig_devices_only_under_mig() -> None:
    found = dra_slices.devices("n1", "NVIDIA-A100-SXM4-80GB", 2, {"1g.10gb": 4, "3g.40gb": 2}, "550.54.15")
    names = [d["name"] for d in found]
    assert names == [
        "gpu-0-mig-1g10gb-0-4",
        "gpu-0-mig-1g10gb-0-5",
        "gpu-0-mig-3g40gb-2-0",
        "gpu-1-mig-1g10gb-0-4",
        "gpu-1-mig-1g10gb-0-5",
        "gpu-1-mig-3g40gb-2-0",
    ]
    big = next(d for d in found if d["name"] == "gpu-0-mig-3g40gb-2-0")
    assert big["attributes"]["type"] == {"string": "mig"}
    assert big["attributes"]["profile"] == {"string": "3g.40gb"}
    assert big["attributes"]["productName"] == {"string": "NVIDIA A100-SXM4-80GB"}
    assert set(big["capacity"]) == {
        "multiprocessors",
        "copyEngines",
        "decoders",
        "encoders",
        "jpegEngines",
        "ofaEngines",
        "memory",
        "memorySlice0",
        "memorySlice1",
        "memorySlice2",
        "memorySlice3",
    }
    assert big["capacity"]["memory"] == {"value": "40960Mi"}
    # each MIG device's parent is its GPU; no two share memory slices on one GPU
    for minor in (0, 1):
        mine = [d for d in found if d["name"].startswith(f"gpu-{minor}-")]
        assert len({d["attributes"]["parentUUID"]["string"] for d in mine}) == 1
        spans = [k for d in mine for k in d["capacity"] if k.startswith("memorySlice")]
        assert len(spans) == len(set(spans))


def test_a_1g_profile_with_two_memory_slices_is_nvmls_rev2() -> None:
    found = dra_slices.devices("n1", "NVIDIA-A100-SXM4-40GB", 1, {"1g.10gb": 2, "1g.5gb": 1}, "550.54.15")
    assert [d["name"] for d in found] == [
        "gpu-0-mig-1g10gb-9-0",
        "gpu-0-mig-1g10gb-9-2",
        "gpu-0-mig-1g5gb-0-4",
    ]


def test_the_slice() -> None:
    body = dra_slices.resource_slice("n1", "uid-1", [{"name": "gpu-0"}], 3)
    assert body["metadata"]["generateName"] == "0-gpu.nvidia.com-n1-"
    assert body["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "uid-1", "controller": True}
    ]
    assert body["spec"] == {
        "driver": "gpu.nvidia.com",
        "nodeName": "n1",
        "pool": {"name": "n1", "generation": 3, "resourceSliceCount": 1},
        "devices": [{"name": "gpu-0"}],
    }


def test_the_compute_domain_slice() -> None:
    # NVIDIA's compute-domain plugin: IMEX channel 0 and the daemon, type and id, no capacity.
    found = dra_slices.compute_domain_devices()
    assert found == [
        {"name": "channel-0", "attributes": {"type": {"string": "channel"}, "id": {"int": 0}}},
        {"name": "daemon-0", "attributes": {"type": {"string": "daemon"}, "id": {"int": 0}}},
    ]
    body = dra_slices.resource_slice("n1", "uid-1", found, 1, dra_slices.COMPUTE_DOMAIN_DRIVER)
    assert body["metadata"]["generateName"] == "0-compute-domain.nvidia.com-n1-"
    assert body["spec"]["driver"] == "compute-domain.nvidia.com" and body["spec"]["pool"]["name"] == "n1"
