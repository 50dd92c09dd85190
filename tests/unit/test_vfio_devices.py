"""We test these aspects of the SIMULATION of NVIDIA's KubeVirt GPU device plugin's names
(ocp_gpu_harness/vfio_devices.py), against kubevirt-gpu-device-plugin v1.6.0:

- getDeviceName's own test case: device 118a "GK104GL [GRID K520]" is GK104GL_GRID_K520;
- the products the harness simulates get the names NVIDIA's docs and KubeVirt examples use
  (nvidia.com/GA102GL_A10, nvidia.com/TU104GL_Tesla_T4 upper-cased, ...);
- `/`, `.` and runs of spaces become `_`, anything else but letters, digits and `_` goes;
- an unknown product is named back with the known ones.
"""

from __future__ import annotations

import pytest

from ocp_gpu_harness import vfio_devices


@pytest.mark.parametrize(
    ("pci_name", "expected"),
    [
        # pkg/device_plugin/device_plugin_test.go: getDeviceName("118a")
        ("GK104GL [GRID K520]", "GK104GL_GRID_K520"),
        ("GA102GL [A10]", "GA102GL_A10"),
        ("TU104GL [Tesla T4]", "TU104GL_TESLA_T4"),
        ("GA100GL [A30 PCIe]", "GA100GL_A30_PCIE"),
        ("GV100GL [Tesla V100 SXM2 16GB]", "GV100GL_TESLA_V100_SXM2_16GB"),
        ("GP104GL [Quadro P4000/P5000 Mobile]", "GP104GL_QUADRO_P4000_P5000_MOBILE"),
        ("GH100 [H100 NVL 2.0]", "GH100_H100_NVL_2_0"),
        ("AD102GL  [L40S]", "AD102GL_L40S"),
    ],
)
def test_device_name_as_the_plugin_makes_it(pci_name: str, expected: str) -> None:
    assert vfio_devices.device_name(pci_name) == expected


def test_resource_names_of_the_simulated_products() -> None:
    assert vfio_devices.resource_name("NVIDIA-A10") == "nvidia.com/GA102GL_A10"
    assert vfio_devices.resource_name("NVIDIA-L40S") == "nvidia.com/AD102GL_L40S"
    assert vfio_devices.resource_name("NVIDIA-A100-SXM4-80GB") == "nvidia.com/GA100_A100_SXM4_80GB"
    with pytest.raises(KeyError, match="NVIDIA-A10"):
        vfio_devices.resource_name("NVIDIA-B200")
