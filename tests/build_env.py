"""Whether the optional C extension (kernels/_int8.c) must have been built here."""

from __future__ import annotations

import os
import shutil
import sysconfig
from pathlib import Path


def can_build_extensions() -> bool:
    """What setuptools needs: the interpreter's C compiler on PATH and its Python.h."""
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    headers = Path(sysconfig.get_paths()["include"], "Python.h")
    return shutil.which(cc) is not None and headers.exists()


def extension_expected() -> bool:
    """In CI always (a runner without a compiler must fail, not skip), elsewhere where the
    extension can be built: an install that skipped it there ran the slow path unnoticed."""
    return bool(os.environ.get("CI")) or can_build_extensions()
