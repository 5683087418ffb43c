"""Buffer reuse (gossip/wire/bufpool.py): a buffer comes back only once nothing references it."""

from __future__ import annotations

import numpy as np
from swarmnode.gossip.wire import bufpool
from swarmnode.gossip.wire import frames as wire
from swarmnode.gossip.wire.bufpool import BufferPool


def test_a_buffer_is_reused_only_once_every_view_of_it_is_gone() -> None:
    pool = BufferPool(keep=2, min_bytes=64)
    first = pool.take(1000)
    addr = first.ctypes.data
    view = memoryview(first)[10:20]  # a slice still being sent, say
    decoded = np.frombuffer(view, np.uint8)
    del first, view
    second = pool.take(1000)
    assert second.ctypes.data != addr and pool.reused == 0  # `decoded` still reads it
    del decoded, second
    third = pool.take(1000)
    assert third.ctypes.data == addr and pool.reused == 1
    assert pool.take(10).nbytes == 10 and pool.reused == 1  # small sizes are not pooled


def test_buffers_of_several_sizes_take_turns_and_the_pool_stays_bounded() -> None:
    pool = BufferPool(keep=2, min_bytes=64)
    for _ in range(3):  # a frame and a body of different sizes, each round
        a, b = pool.take(1000), pool.take(2000)
        assert (a.nbytes, b.nbytes) == (1000, 2000)
        del a, b
    assert pool.reused == 4
    held = [pool.take(3000), pool.take(4000), pool.take(5000)]  # all in use: none reused
    assert len({h.ctypes.data for h in held}) == 3 and len(pool._bufs) <= 2


def test_a_decoded_frame_outlives_later_frames_unchanged() -> None:
    n = 5_000_000  # 20 MB: pooled
    frame = wire.encode_params(np.ones(n, np.float32), sender="a", step=3)
    _, mine = wire.decode_params(frame)  # a view into the pooled buffer
    del frame
    later = wire.encode_params(np.full(n, 2.0, np.float32), sender="a", step=4)
    assert mine[0] == 1.0 and mine[-1] == 1.0
    _, arr = wire.decode_params(later)
    assert arr[0] == 2.0


def test_pooled_float_vectors_come_back_only_once_every_view_is_gone() -> None:
    """`bufpool.floats`: a model-sized float32 vector (a snapshot, a decoded payload, a pair's
    reference) is reused only after its last view, however derived, is dropped."""
    n = bufpool.MIN_POOLED_BYTES // 4
    first = bufpool.floats(n)
    assert first.dtype == np.float32 and first.size == n
    addr = first.ctypes.data
    kept = first.reshape(-1)[5:]  # a reference still holding it: a pair's `sent`, say
    del first
    second = bufpool.floats(n)
    assert second.ctypes.data != addr
    addrs = {addr, second.ctypes.data}
    del kept, second
    assert bufpool.floats(n).ctypes.data in addrs  # one of the two, not a fresh allocation
