"""A data set's fingerprint: what a joiner compares with the swarm's before it mixes models.

Two peers training one model on different data of the same shape (`synthetic:2000,64,10` into
a digits swarm) were accepted and mixed to chance. The fingerprint is a short digest of what
makes two data sets the same task: the input shape, the number of classes, and the test split
(every label, and the first `ROWS` inputs, so a streamed set of gigabytes costs one small
read). Not the spec or the path: the same `.npz` sits at other paths on other machines. A
user's data function may give its own (`"fingerprint"` in the mapping it returns), for data
that differs per machine by design or is too costly to read.
"""

from __future__ import annotations

import hashlib

import numpy as np
from swarmnode.node.train.data.datasets import Dataset

ROWS = 256  # test inputs hashed: enough to tell two data sets apart, cheap on a streamed one
DIGITS = 12  # hex digits kept: short enough for the signed member record
MAX_OWN = 32  # characters of a user's own fingerprint kept


def data_fingerprint(data: Dataset) -> str:
    """The user's own fingerprint where the data function gave one, else the digest."""
    if data.fingerprint:
        return str(data.fingerprint)[:MAX_OWN]
    h = hashlib.blake2b(digest_size=16)
    shape = "x".join(str(d) for d in data.input_shape)
    h.update(f"{shape}/{data.n_classes}/{len(data.y_test)}".encode())
    h.update(np.ascontiguousarray(data.y_test).tobytes())
    rows = min(ROWS, len(data.y_test))
    h.update(np.ascontiguousarray(np.asarray(data.X_test[:rows], dtype=np.float32)).tobytes())
    return h.hexdigest()[:DIGITS]
