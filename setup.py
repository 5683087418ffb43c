"""The fused int8 codec kernel (kernels/_int8.c); everything else is in pyproject.toml.

Here rather than in pyproject.toml's `[tool.setuptools] ext-modules`, which setuptools still
calls experimental and warns about on every build. Compiled at install where a C compiler is
found, skipped with a warning where none is (`optional`): kernels/int8_native.py then falls back
to the numpy path. No -march: the wheel must run on any x86-64 or aarch64; the loops are written
for the compiler to vectorise at the baseline ISA (plus an AVX2 copy on x86-64, picked at run
time: kernels/_int8.c). -ffp-contract=off: an FMA would round x * inv + 1.5 * 2^23 once, not
twice, and break the bits of the reference.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "swarmnode.kernels._int8",
            sources=["kernels/_int8.c"],
            depends=["kernels/_int8_core.h", "kernels/_int8_loops.h"],
            extra_compile_args=["-O3", "-ffp-contract=off"],
            optional=True,
        )
    ]
)
