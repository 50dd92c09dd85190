"""What a driver pod installs on its node: the facts planning/drivers/driver_currency.py compares.

Pure data: no I/O.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class DriverInstall:
    """What a driver pod installs on its node (planning/driver_currency: read from a pod spec)."""

    driver_image: str
    dtk_image: str = ""
    # driver_currency.INSTALL_ENV's names and values, defaults filled in, sorted.
    env: tuple[tuple[str, str], ...] = ()
    # (container, image) of the module containers present, sorted.
    modules: tuple[tuple[str, str], ...] = ()
    # "configMap/<name> at <path>" or "secret/<name> at <path>", sorted.
    config: tuple[str, ...] = ()
