"""Deprecated since pytest-xtc 0.2: import the vendor API from ``pytest_xtc`` (and XTC
helpers as ``from pytest_xtc import xtc_env``). This module still works and warns."""

import warnings

from pytest_xtc.core.xtc.xtc_env import *  # noqa: F403

warnings.warn(
    "pytest_xtc.xtc_env is deprecated since pytest-xtc 0.2: import its names from pytest_xtc "
    "(or pytest_xtc.core.xtc.xtc_env)",
    DeprecationWarning,
    stacklevel=2,
)
