"""The training data: data sets, inputs read from disk, and which samples a peer owns.
Imports no other room of node/train.

- `datasets.py`: `Dataset`, a validated train/test split, and `load_dataset(spec)` (the bundled
  `digits.npz` beside it, the seeded `synthetic:` and `signal:` tasks, an `.npz`, a folder of
  `.npy` files); `dataset_from_arrays` for a user's arrays.
- `fingerprint.py`: a short digest of what makes two data sets the same task (`data_fingerprint`),
  which a joiner compares with the swarm's.
- `streamed.py`: inputs larger than memory, read a batch at a time (`NpyRows`, `RowView`).
- `shard.py`: a peer's shard of the train set, `iid` or label-skewed `dirichlet:ALPHA`.
- `label_prior.py`: the logit adjustment that a label-skewed shard trains with.
"""

from swarmnode.node.train.data.datasets import Dataset, dataset_from_arrays, load_dataset
from swarmnode.node.train.data.fingerprint import data_fingerprint
from swarmnode.node.train.data.label_prior import check_tau, logit_offsets
from swarmnode.node.train.data.shard import Partition, parse_partition, parse_shard, shard_indices
from swarmnode.node.train.data.streamed import NpyRows, is_streamed, take_rows

__all__ = [
    "Dataset",
    "NpyRows",
    "Partition",
    "check_tau",
    "data_fingerprint",
    "dataset_from_arrays",
    "is_streamed",
    "load_dataset",
    "logit_offsets",
    "parse_partition",
    "parse_shard",
    "shard_indices",
    "take_rows",
]
