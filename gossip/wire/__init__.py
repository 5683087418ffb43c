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

from swarmnode.gossip.wire.bufpool import BODIES, BufferPool, floats, halves
from swarmnode.gossip.wire.control import (
    MAX_CONTROL_BYTES,
    PROTOCOL_VERSION,
    decode_control,
    encode_control,
    require,
    unpack_bounded,
)
from swarmnode.gossip.wire.covered import mark
from swarmnode.gossip.wire.finite import count_nonfinite
from swarmnode.gossip.wire.frames import (
    FrameHeader,
    WireCaps,
    decode_params,
    encode_into_frame,
    encode_packed,
    encode_params,
    max_frame_bytes,
    read_header,
    validate_params,
)

__all__ = [
    "BODIES",
    "MAX_CONTROL_BYTES",
    "PROTOCOL_VERSION",
    "BufferPool",
    "FrameHeader",
    "WireCaps",
    "count_nonfinite",
    "decode_control",
    "decode_params",
    "encode_control",
    "encode_into_frame",
    "encode_packed",
    "encode_params",
    "floats",
    "halves",
    "mark",
    "max_frame_bytes",
    "read_header",
    "require",
    "unpack_bounded",
    "validate_params",
]
