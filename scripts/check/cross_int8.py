"""The int8 C kernel on another architecture: build kernels/_int8_core.h into a test program
with a cross compiler, run it under an emulator, compare its bytes with the numpy reference.

    python scripts/check/cross_int8.py                       # aarch64: gcc-aarch64-linux-gnu + qemu
    python scripts/check/cross_int8.py --cc gcc --run ''     # this machine, every ISA copy it runs

The extension's own tests (tests/kernels/test_compress_int8_c.py) run where the wheel is built;
this checks the same loops where none is at hand: random vectors, odd lengths, short tails, and
blocks of zeros, subnormals, Inf and NaN (canonical NaNs: tests/kernels/test_compress_int8_c.py
has the rule for payloads). Exit code 1 on any difference, naming the case.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from swarmnode.kernels import compress_ref
from swarmnode.kernels.codec_base import CHUNK, I8_MIN_AMAX

ROOT = Path(__file__).resolve().parents[2]

# reads n float32 from argv[1]; for every ISA copy it runs, writes q, scales, decoded values
HARNESS = r"""
#include <stdio.h>
#include <stdlib.h>
#include "_int8_core.h"

static void *slurp(const char *path, size_t n) {
    void *p = malloc(n ? n : 1);
    FILE *f = fopen(path, "rb");
    if (!p || !f || fread(p, 1, n, f) != n) exit(2);
    fclose(f);
    return p;
}

static void spill(const char *prefix, const char *isa, const char *part, const void *p, size_t n) {
    char path[4096];
    snprintf(path, sizeof path, "%s.%s.%s", prefix, isa, part);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n) exit(3);
    fclose(f);
}

int main(int argc, char **argv) {
    if (argc != 7) return 4;
    ptrdiff_t n = atol(argv[3]), block = atol(argv[4]), chunk = atol(argv[5]);
    uint32_t bits = (uint32_t)strtoul(argv[6], NULL, 16);
    float min_amax;
    memcpy(&min_amax, &bits, 4);
    ptrdiff_t ns = (n / chunk) * chunk_groups(chunk, block) + (n % chunk ? chunk_groups(n % chunk, block) : 0);
    ptrdiff_t g0 = chunk_groups(n < chunk ? (n ? n : 1) : chunk, block);
    float *x = slurp(argv[1], (size_t)n * 4), *scales = malloc((size_t)ns * 4 + 4);
    float *inv = malloc((size_t)g0 * 4), *dec = malloc((size_t)n * 4 + 4);
    int32_t *amax = malloc((size_t)g0 * 4);
    int8_t *q = malloc((size_t)n + 1);
    find_isas();
    for (int i = 0; i < n_isas; i++) {
        isas[i].encode(x, n, block, chunk, min_amax, q, scales, amax, inv);
        isas[i].decode(q, scales, n, block, chunk, dec);
        spill(argv[2], isas[i].name, "q", q, (size_t)n);
        spill(argv[2], isas[i].name, "scales", scales, (size_t)ns * 4);
        spill(argv[2], isas[i].name, "dec", dec, (size_t)n * 4);
    }
    printf("%d", n_isas);
    for (int i = 0; i < n_isas; i++) printf(" %s", isas[i].name);
    printf("\n");
    return 0;
}
"""


def cases() -> Iterator[tuple[str, np.ndarray, int]]:
    rng = np.random.default_rng(0)
    for n in (0, 1, 3, 255, 257, CHUNK - 1, CHUNK + 1, 2 * CHUNK + 999):
        for block in (1, 4, 64, 256, 65536):
            if block > 64 or n < 4 * CHUNK // block:
                x = (rng.standard_normal(n) * 7).astype(np.float32)
                yield f"random n={n} block={block}", x, block
    x = rng.standard_normal(CHUNK + 4321).astype(np.float32)
    groups = CHUNK // 256
    col = np.arange(x.size) % groups
    first = np.arange(x.size) < CHUNK
    specials = [0.0, -0.0, 1e-44, -1e-39, float(I8_MIN_AMAX), np.inf, -np.inf, np.nan, -np.nan]
    for g, value in enumerate(specials):
        x[first & (col == g)] = value
    x[first & (col == 20)] = np.where(np.arange(x.size)[first & (col == 20)] % 3, 1.0, np.nan)
    x[np.flatnonzero(first & (col == 21))[5]] = np.inf
    x[-1] = np.nan
    yield "zero, subnormal, Inf and NaN blocks", x, 256
    x = rng.integers(0, 2**32, 100_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    # NaN payloads made canonical: which of several a block's NaN scale carries is not defined
    # by the reference (numpy's pick varies with the array's shape)
    x[np.isnan(x)] = np.copysign(np.float32(np.nan), x[np.isnan(x)])
    yield "random bit patterns", x, 64


def build(cc: str, workdir: Path) -> Path:
    src, exe = workdir / "harness.c", workdir / "harness"
    src.write_text(HARNESS)
    cmd = [*shlex.split(cc), "-O3", "-ffp-contract=off", "-static", "-I", str(ROOT / "kernels")]
    subprocess.run([*cmd, str(src), "-o", str(exe)], check=True)
    return exe


def check(
    exe: Path, run: list[str], workdir: Path, name: str, x: np.ndarray, block: int
) -> tuple[list[str], list[str]]:
    """(the ISA copies the program ran, the parts of them that differ from the reference)."""
    (workdir / "x.bin").write_bytes(x.tobytes())
    prefix = workdir / "out"
    args = [str(exe), str(workdir / "x.bin"), str(prefix), str(x.size), str(block), str(CHUNK)]
    args.append(f"{np.float32(I8_MIN_AMAX).view(np.uint32):08x}")
    out = subprocess.run([*run, *args], check=True, capture_output=True, text=True).stdout
    with np.errstate(all="ignore"):  # the reference's Inf * 0 and its casts of NaN
        ref = compress_ref.int8_encode(x, block)
        want = {
            "q": ref.parts["q"].tobytes(),
            "scales": ref.parts["scales"].tobytes(),
            "dec": compress_ref.int8_decode(ref).tobytes(),
        }
    isas = out.split()[1:]
    bad = [
        f"{name}: {isa} {part}"
        for isa in isas
        for part, expect in want.items()
        if not same(part, Path(f"{prefix}.{isa}.{part}").read_bytes(), expect)
    ]
    return isas, bad


def same(part: str, got: bytes, want: bytes) -> bool:
    """Bytes equal; in decoded values a NaN made by the hardware (0 * Inf) may differ in its
    sign: x86's default NaN is negative, ARM's positive (the reference here ran on this host)."""
    if got == want or part != "dec" or len(got) != len(want):
        return got == want
    g, w = np.frombuffer(got, np.float32), np.frombuffer(want, np.float32)
    nan = np.isnan(w)
    return bool(
        (np.isnan(g) == nan).all() and (g[~nan].view(np.uint32) == w[~nan].view(np.uint32)).all()
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cc", default="aarch64-linux-gnu-gcc")
    ap.add_argument("--run", default="qemu-aarch64-static", help="emulator ('' to run natively)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        exe = build(args.cc, workdir)
        run = shlex.split(args.run)
        bad, count, isas = [], 0, []
        for name, x, block in cases():
            isas, differ = check(exe, run, workdir, name, x, block)
            bad += differ
            count += 1
    print(f"{count} cases, compiler {args.cc!r}, runner {args.run!r}, ISA copies {isas}")
    for line in bad:
        print("DIFFERS:", line)
    print(
        "all bit for bit the reference (NaNs made by 0 * Inf compared as NaN)"
        if not bad
        else f"{len(bad)} differences"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
