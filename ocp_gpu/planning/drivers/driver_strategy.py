"""How drivers get their kernel modules: the strategy (DTK, vanilla, precompiled) and its settings.

Decides, from the ClusterPolicy, the platform and the operator's environment, the
cluster-wide strategy and the `DriverSettings` driver planning runs with.  Never
reads the cluster or renders anything.
"""

from __future__ import annotations

import datetime
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from ocp_gpu.model import images
from ocp_gpu.model.driver_snapshot import DriverKey
from ocp_gpu.model.policy import policy_spec
from ocp_gpu.model.policy.policy_problems import PolicyProblem
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
    if _driver_toolkit_allowed(platform, policy):
        return Strategy.DTK
    # vanilla Kubernetes, or OpenShift with `use_ocp_driver_toolkit: false`
    return Strategy.VANILLA


def should_use_driver_toolkit(platform: platforms.Platform, policy: policy_spec.Policy) -> bool:
    """Whether driver DaemonSets are built per RHCOS version with the Driver Toolkit."""
    # no driver to build when drivers are disabled
    return policy.driver.enabled and select_strategy(platform, policy) is Strategy.DTK


def _driver_toolkit_allowed(platform: platforms.Platform, policy: policy_spec.Policy) -> bool:
    """The cluster can build with the Driver Toolkit and the policy has not switched it off."""
    # Only OpenShift has the driver-toolkit ImageStream; there it is the default, and only
    # an explicit false turns it off.
    return platform.is_openshift and policy.operator.use_ocp_driver_toolkit is not False


@dataclass(frozen=True)
class DriverSettings:
    """The policy and platform inputs of driver planning, already resolved by the caller."""

    strategy: Strategy
    # The driver image without its OS suffix (images.resolve_image for `driver`); each key adds
    # `-<os>` (or `-<kernel>-<os>` when precompiled) with images.driver_image_for.
    driver_image: images.ImageRef
    # Precompiled keys may fall back to DTK builds here: OpenShift with the Driver Toolkit and
    # `driver.precompiledFallback` enabled with a version.
    dtk_available: bool = False
    # Precompiled keys whose nodes are built with DTK instead, with the precompiled image that
    # failed (from `plan_precompiled_fallback(...).keys`).
    dtk_fallback: Mapping[DriverKey, str] = field(default_factory=dict)
    # NB: precompiled images are tagged by driver *branch* (570) while DTK builds need a full
    # version (570.124.06); the base image for fallback builds, `driver_image` when None.
    fallback_driver_image: images.ImageRef | None = None


def settings_for_policy(
    policy: policy_spec.Policy,
    platform: platforms.Platform,
    env: Mapping[str, str],
    *,
    dtk_fallback: Mapping[DriverKey, str] | None = None,
) -> DriverSettings | PolicyProblem:
    """DriverSettings from the ClusterPolicy, the platform and the operator's environment.

    A driver image that cannot be resolved is returned as the problem (for status), so no
    DaemonSet is ever rendered with a broken image.
    """
    driver = policy.driver
    base = images.resolve_image(driver.image, component="driver", env=env)
    # the image cannot be resolved: nothing to plan with, say which field is at fault
    if isinstance(base, PolicyProblem):
        return base
    fallback = driver.precompiled_fallback
    # NB: an enabled fallback without a version is a policy error (validate_policy); it
    # must not build `<branch>-<os>` images that do not exist.
    dtk_available = _driver_toolkit_allowed(platform, policy) and fallback.enabled and bool(fallback.version)
    fallback_image: images.ImageRef | None = None
    if driver.use_precompiled and dtk_available:
        # fallback builds need the full version: the driver image, retagged
        resolved = images.resolve_image(
            replace(driver.image, version=fallback.version), component="driver", env=env
        )
        if isinstance(resolved, PolicyProblem):
            return resolved
        fallback_image = resolved
    return DriverSettings(
        strategy=select_strategy(platform, policy),
        driver_image=base,
        dtk_available=dtk_available,
        dtk_fallback=dict(dtk_fallback or {}) if dtk_available else {},
        fallback_driver_image=fallback_image,
    )


def fallback_grace(policy: policy_spec.Policy) -> datetime.timedelta:
    """How long a precompiled image may fail to pull before its key falls back to a DTK build."""
    return datetime.timedelta(seconds=policy.driver.precompiled_fallback.image_pull_timeout_seconds)
