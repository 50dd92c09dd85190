"""OpenShift's cluster-wide egress proxy (`Proxy cluster`), as the operands need it."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class ClusterProxy:
    """OpenShift's `Proxy cluster` as the driver needs it (status: the effective values)."""

    http_proxy: str = ""
    https_proxy: str = ""
    no_proxy: str = ""
    # spec.trustedCA.name is set: mount the injected CA bundle.
    trusted_ca: bool = False

    def env(self) -> list[tuple[str, str]]:
        """HTTP_PROXY/http_proxy, … for every value set (upper and lower case, as tools differ)."""
        pairs: list[tuple[str, str]] = []
        for name, value in (
            ("HTTP_PROXY", self.http_proxy),
            ("HTTPS_PROXY", self.https_proxy),
            ("NO_PROXY", self.no_proxy),
        ):
            if value:
                pairs += [(name, value), (name.lower(), value)]
        return pairs
