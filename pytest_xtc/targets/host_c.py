"""``host-c``: XTC's MLIR-to-C target (``xtc-translate``), compiled by the C compiler."""

from __future__ import annotations

from pathlib import Path

from pytest_xtc.core.adapter import Probe, Tier
from pytest_xtc.targets.host import HostTarget


class HostCTarget(HostTarget):
    xtc_target = "c"
    # The C emitter does not take vector ops (XTC asserts during translation).
    unsupported_primitives = frozenset({"vectorize"})

    def probe(self) -> Probe:
        found = super().probe()
        if found.tier is Tier.UNAVAILABLE:
            return found
        from xtc.backends.mlir.MlirConfig import MlirConfig

        translate = Path(f"{MlirConfig().mlir_install_dir}/bin/xtc-translate")
        if not translate.is_file():
            return Probe(
                Tier.UNAVAILABLE,
                f"{translate} not found (install xtc-mlir-extra-tools)",
                found.versions,
            )
        return Probe(Tier.EXECUTE, "", found.versions, device="host CPU")
