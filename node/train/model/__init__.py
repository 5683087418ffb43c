"""What a model is and where it comes from. Imports no other room of node/train.

- `protocol.py`: the two model protocols: `Model`, what a user writes, and `TrainableModel`,
  what the trainer drives (the seam: nothing past it sees more than one flat vector).
- `builtin.py`: the built-in models by spec string (`mlp:256,128`, `cnn1d:...`, `cnn2d:...`,
  `linear`), `build_model` and its grammar.
- `user_model.py`: `UserModel`, a user's `Model` as a checked `TrainableModel`.
- `torch_model.py`: `TorchModel`, a torch `nn.Module` and loss as a `Model` (needs torch).
"""

from swarmnode.node.train.model.builtin import KINDS, build_model
from swarmnode.node.train.model.protocol import Model, TrainableModel
from swarmnode.node.train.model.torch_model import TorchModel
from swarmnode.node.train.model.user_model import UserModel

__all__ = ["KINDS", "Model", "TorchModel", "TrainableModel", "UserModel", "build_model"]
