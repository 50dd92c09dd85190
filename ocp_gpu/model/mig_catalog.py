"""MIG facts: which GPUs can be partitioned how, and the MIG configs ocp-gpu ships by default.

A MIG profile (`1g.10gb`: one compute slice, 10 GB) can be made a fixed number of
times on one GPU of a given family; the families differ (an A100 40GB makes seven
`1g.5gb`, an 80GB A100 or H100 seven `1g.10gb`).  From that table the operator builds
the ConfigMap `default-mig-parted-config` in mig-parted's format (`version: v1`,
`mig-configs: {<name>: [{devices, mig-enabled, mig-devices, device-filter?}]}`) that
the MIG manager reads when `migManager.config.name` is unset: `all-disabled`,
`all-enabled`, one `all-<profile>` per profile (`+` written `.` in the name, as in
`all-1g.10gb.me`), and `all-balanced`.  A config whose profile several families
know with different counts gets one entry per family, selected by PCI device id
(`device-filter`, `0x<device><vendor>` as mig-parted reads it).

Pure data: no I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Final

# The configs every default set has, and the one the operator labels nodes with.
ALL_DISABLED: Final = "all-disabled"
ALL_ENABLED: Final = "all-enabled"
ALL_BALANCED: Final = "all-balanced"
# The key of the config file in the ConfigMap (the MIG manager's CONFIG_FILE names it).
CONFIG_KEY: Final = "config.yaml"
# The format version mig-parted reads.
FORMAT_VERSION: Final = "v1"


@dataclasses.dataclass(frozen=True)
class GpuFamily:
    """GPUs that partition alike."""

    name: str
    # PCI ids as mig-parted's device-filter spells them (device id, then NVIDIA's vendor id 10de).
    device_ids: tuple[str, ...]
    # GPU products (GFD's nvidia.com/gpu.product) of the family, for the harness simulation.
    products: tuple[str, ...]
    # Each profile with the most instances of it one GPU holds.
    profiles: Mapping[str, int]
    # One small, one medium, one large slice: a mix most clusters start with.
    balanced: Mapping[str, int]


# NB: ordered; a config lists its entries in this order.
FAMILIES: Final = (
    GpuFamily(
        "A100-40GB",
        ("0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE"),
        ("NVIDIA-A100-SXM4-40GB", "NVIDIA-A100-PCIE-40GB"),
        {"1g.5gb": 7, "1g.5gb+me": 1, "1g.10gb": 4, "2g.10gb": 3, "3g.20gb": 2, "4g.20gb": 1, "7g.40gb": 1},
        {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1},
    ),
    GpuFamily(
        "A100-80GB/H100-80GB",
        ("0x20B210DE", "0x20B510DE", "0x20F310DE", "0x20F510DE", "0x233010DE", "0x233110DE", "0x232210DE"),
        ("NVIDIA-A100-SXM4-80GB", "NVIDIA-A100-80GB-PCIe", "NVIDIA-H100-80GB-HBM3", "NVIDIA-H100-PCIe"),
        {
            "1g.10gb": 7,
            "1g.10gb+me": 1,
            "1g.20gb": 4,
            "2g.20gb": 3,
            "3g.40gb": 2,
            "4g.40gb": 1,
            "7g.80gb": 1,
        },
        {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
    ),
    GpuFamily(
        "A30-24GB",
        ("0x20B710DE",),
        ("NVIDIA-A30",),
        {"1g.6gb": 4, "1g.6gb+me": 1, "2g.12gb": 2, "2g.12gb+me": 1, "4g.24gb": 1},
        {"1g.6gb": 2, "2g.12gb": 1},
    ),
)


def config_name(profile: str) -> str:
    """The `all-<profile>` config of one profile (`1g.10gb+me` -> `all-1g.10gb.me`)."""
    return "all-" + profile.replace("+", ".")


def family_of_product(product: str) -> GpuFamily | None:
    """The family of a GPU product name (GFD's label; a `-MIG-...` suffix is ignored)."""
    base = product.split("-MIG-", 1)[0]
    return next((family for family in FAMILIES if base in family.products), None)


def _entry(devices: Mapping[str, int], family: GpuFamily | None) -> dict[str, Any]:
    entry: dict[str, Any] = {}
    if family is not None:
        entry["device-filter"] = list(family.device_ids)
    entry.update({"devices": "all", "mig-enabled": True, "mig-devices": dict(devices)})
    return entry


def default_configs() -> dict[str, Any]:
    """The mig-parted config file the operator ships (`default-mig-parted-config`), as data."""
    configs: dict[str, list[dict[str, Any]]] = {
        ALL_DISABLED: [{"devices": "all", "mig-enabled": False}],
        ALL_ENABLED: [{"devices": "all", "mig-enabled": True, "mig-devices": {}}],
    }
    profiles: dict[str, list[GpuFamily]] = {}
    for family in FAMILIES:
        for profile in family.profiles:
            profiles.setdefault(profile, []).append(family)
    for profile, families in profiles.items():
        if len(families) == 1:
            # Only one family makes this profile: every GPU that can, does.
            configs[config_name(profile)] = [_entry({profile: families[0].profiles[profile]}, None)]
        else:
            # The count differs per family: one entry per family, chosen by device id.
            configs[config_name(profile)] = [_entry({profile: f.profiles[profile]}, f) for f in families]
    configs[ALL_BALANCED] = [_entry(family.balanced, family) for family in FAMILIES]
    return {"version": FORMAT_VERSION, "mig-configs": configs}
