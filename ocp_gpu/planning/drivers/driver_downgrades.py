"""Whether a driver change is a downgrade: the new driver version below the running one.

Decides, from two driver image references, whether the rendered DaemonSet would
replace a newer driver with an older one (the seed's 510.85.02 below a running
550.x).  The operator still rolls it (the admin asked for that version, and
NVIDIA's operator does the same), but says so in the log and a Warning Event, so a
typo does not roll back a fleet unnoticed.  Pure: no I/O.
"""

from __future__ import annotations

import dataclasses

from packaging.version import InvalidVersion, Version


@dataclasses.dataclass(frozen=True)
class Downgrade:
    daemonset: str
    running: str
    wanted: str

    @property
    def message(self) -> str:
        return (
            f"{self.daemonset}: driver {self.wanted} is older than the running {self.running} "
            "(a downgrade); it rolls as asked, node by node. If this is a typo, set driver.version back"
        )


def driver_version(image: str) -> tuple[str, Version] | None:
    """The driver version in a driver image's tag, as written and comparable.

    `…/driver:550.90.07-rhel9` -> ("550.90.07", Version("550.90.7")).  None for a digest,
    a tag without a version, or a version packaging cannot compare.
    NB: the text is kept for messages: packaging normalises 550.90.07 to 550.90.7.
    """
    name = image.rsplit("/", 1)[-1]
    if "@" in name or ":" not in name:
        # pinned by digest, or no tag: nothing to compare
        return None
    text = name.split(":", 1)[1].split("-", 1)[0]
    try:
        return text, Version(text)
    except InvalidVersion:
        return None


def plan_downgrade(daemonset: str, running_image: str, wanted_image: str) -> Downgrade | None:
    """A Downgrade when `wanted_image` carries an older driver than `running_image`."""
    running, wanted = driver_version(running_image), driver_version(wanted_image)
    if running is None or wanted is None or wanted[1] >= running[1]:
        # not comparable, the same, or newer: nothing to say
        return None
    return Downgrade(daemonset, running[0], wanted[0])
