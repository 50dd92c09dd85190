"""How drivers get their kernel modules: the strategy (DTK, vanilla, precompiled).

Decides, from the ClusterPolicy and the platform, the cluster-wide strategy (the
`DriverSettings` driver planning runs with are driver_plan.settings_for_policy's).  Never
reads the cluster or renders anything.
"""

from __future__ import annotations

import enum

from ocp_gpu.model.policy import policy_spec
from ocp_gpu.planning import platforms


class Strategy(enum.StrEnum):
    """How a driver DaemonSet gets its kernel modules; the value is the `ocp-gpu.io/driver-strategy` label."""

    # Build on the node with the OpenShift Driver Toolkit sidecar; keyed by RHCOS build.
    DTK = "dtk"
    # Build in the driver container from the OS's packages; keyed by OS.
    VANILLA = "vanilla"
    # Load modules prebuilt into the image; keyed by kernel + OS.
    PRECOMPILED = "precompiled"


def select_strategy(platform: platforms.Platform, policy: policy_spec.Policy) -> Strategy:
    """The cluster-wide driver strategy (DESIGN §3): the one place it is decided.

    NB: `driver.enabled: false` is the caller's to check first (no strategy applies then);
    `should_use_driver_toolkit` folds it in for the Driver Toolkit gauges.
    """
    # precompiled wins on every platform (DTK only as a per-key fallback)
    if policy.driver.use_precompiled:
        return Strategy.PRECOMPILED
    # OpenShift (image.openshift.io served) with the Driver Toolkit not switched off
    if driver_toolkit_allowed(platform, policy):
        return Strategy.DTK
    # vanilla Kubernetes, or OpenShift with `use_ocp_driver_toolkit: false`
    return Strategy.VANILLA


def should_use_driver_toolkit(platform: platforms.Platform, policy: policy_spec.Policy) -> bool:
    """Whether driver DaemonSets are built per RHCOS version with the Driver Toolkit."""
    # no driver to build when drivers are disabled
    return policy.driver.enabled and select_strategy(platform, policy) is Strategy.DTK


def driver_toolkit_allowed(platform: platforms.Platform, policy: policy_spec.Policy) -> bool:
    """The cluster can build with the Driver Toolkit and the policy has not switched it off."""
    # Only OpenShift has the driver-toolkit ImageStream; there it is the default, and only
    # an explicit false turns it off.
    return platform.is_openshift and policy.operator.use_ocp_driver_toolkit is not False
