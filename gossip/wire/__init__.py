"""What the bytes are. Imports no other gossip room.

- `frames.py`: parameter frames: a small msgpack header, then the raw buffer; caps checked
  before any allocation (`WireCaps`, `encode_params`, `decode_params`, `validate_params`);
  a header read once, ahead of its payload (`read_header`: a `FrameHeader`).
- `codecs.py`: payload layouts of the lossy codecs (fp16, int8 blocks, top-k, low-rank).
- `control.py`: control messages, small msgpack maps with a `version` and a `type`.
- `bufpool.py`: large buffers reused once nothing references them (`BufferPool`).
- `finite.py`: the NaN/Inf count of a received vector, one BLAS pass when all is finite.
- `covered.py`: bodies whose every byte a verified envelope digest already covers.
"""

from swarmnode.gossip.wire.bufpool import BufferPool
from swarmnode.gossip.wire.control import decode_control, encode_control
from swarmnode.gossip.wire.finite import count_nonfinite
from swarmnode.gossip.wire.frames import (
    FrameHeader,
    WireCaps,
    decode_params,
    encode_params,
    max_frame_bytes,
    peek_header,
    read_header,
    validate_params,
)

__all__ = [
    "BufferPool",
    "FrameHeader",
    "WireCaps",
    "count_nonfinite",
    "decode_control",
    "decode_params",
    "encode_control",
    "encode_params",
    "max_frame_bytes",
    "peek_header",
    "read_header",
    "validate_params",
]
