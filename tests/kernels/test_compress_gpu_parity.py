"""cupy codec twins vs the numpy CPU path (kernels/compress.py, bit for bit the definitions in
kernels/compress_ref.py) on random vectors.

Marked gpu: tests/conftest.py skips them without cupy or a device. cupy is imported inside the
tests only, so this module collects on a machine without it.
"""

from __future__ import annotations

import numpy as np
import pytest
from swarmnode.kernels import compress

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(120)]

SIZES = [1, 255, 256, 1000, compress.CHUNK + 17]


def vec(n: int, seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(n) * 2).astype(np.float32)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("codec", ["fp16", "int8", "topk"])
def test_encode_decode_parity(codec: str, n: int) -> None:
    import cupy as cp

    x = vec(n, n)
    x[0] = 1e6  # fp16 saturation
    host = compress.encode(x, codec, 0.05)
    dev = compress.encode(cp.asarray(x), codec, 0.05)
    assert host.k == dev.k and host.block == dev.block
    for name, part in host.parts.items():
        np.testing.assert_array_equal(cp.asnumpy(dev.parts[name]), part, err_msg=name)
    np.testing.assert_array_equal(cp.asnumpy(compress.decode(dev)), compress.decode(host))


def test_twin_refuses_bad_input() -> None:
    import cupy as cp
    from swarmnode.kernels.errors import ShapeError

    with pytest.raises(ShapeError):
        compress.encode(cp.zeros(4, cp.float64), "int8")
