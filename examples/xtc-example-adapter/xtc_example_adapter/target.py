"""``example-host-o1``: the ``host`` target with one XTC compiler option changed.

``host`` compiles for this very CPU (XTC's ``MlirConfig.cpu = "native"``, given to LLVM's
``opt`` and ``llc`` as ``--mcpu=native``). This target compiles for the generic CPU of the
same architecture instead (``--mcpu=generic``: no AVX2 or FMA on x86-64, say): portable
code, with results that must still pass every check of the suite.

Capabilities, running and warm-up are ``host``'s; the probe adds this package's version
and the CPU compiled for.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pytest_xtc import Artifact, OptionSpec, Probe, Tier, xtc_env
from pytest_xtc.targets.host import HostTarget

if TYPE_CHECKING:
    from pytest_xtc import Case

DISTRIBUTION = "xtc-example-adapter"


class ExampleHostO1(HostTarget):
    #: Adds ``--xtc-example-cpu`` to pytest (``--target-option example-cpu=...`` to
    #: ``xtc-conformance``), read from ``XTC_EXAMPLE_CPU`` when not given.
    options = (
        OptionSpec(
            "example-cpu",
            "CPU that example-host-o1 compiles for (LLVM --mcpu; default generic)",
            env="XTC_EXAMPLE_CPU",
        ),
    )
    #: Fields of XTC's ``MlirConfig`` given to ``get_compiler``, on top of ``host``'s.
    compiler_options: ClassVar[Mapping[str, Any]] = {"cpu": "generic"}

    def settings(self) -> dict[str, Any]:
        """The compiler options of this run: the defaults, then the user's option."""
        chosen = self.spec.options.get("example-cpu")
        return {**self.compiler_options, **({"cpu": chosen} if chosen else {})}

    def probe(self) -> Probe:
        found = super().probe()  # XTC's MLIR backend imports, or the reason why not
        versions = dict(found.versions)
        try:
            versions[DISTRIBUTION] = metadata.version(DISTRIBUTION)
        except metadata.PackageNotFoundError:  # run from a source tree
            versions[DISTRIBUTION] = "source"
        if found.tier is Tier.UNAVAILABLE:
            return Probe(found.tier, found.reason, versions)
        cpu = self.settings()["cpu"]
        return Probe(Tier.EXECUTE, "", versions, device=f"host CPU (code for --mcpu={cpu})")

    def compile(self, case: Case, workdir: Path) -> Artifact:
        options = self.settings()
        module = xtc_env.compile_case(case, workdir, self.xtc_target, **options)
        notes = {key: str(value) for key, value in options.items()}
        return Artifact(workdir, module, sorted(workdir.iterdir()), notes)
