"""What `--model` and `--data` name: a built-in spec, the user's `MODULE:FUNCTION`, or (from
Python, `swarmnode.Peer`) a model, a factory, arrays or a data function given as objects.

A model factory is called with whichever of `input_shape`, `n_classes`, `seed` and `device`
(`"cpu"`, `"cuda:0"`) it names as parameters; a data function with `seed` if it names it. A
data function returns a `Dataset` or `X_train, y_train, X_test, y_test` (a dict or a 4-tuple;
inputs in memory, or streamed: node/train/data/streamed.py). What a user's function returns is
checked here, before the peer serves or joins a swarm.
"""

from __future__ import annotations

from typing import Any

from swarmnode.kernels.backend import Backend
from swarmnode.kernels.flat import FlatParams
from swarmnode.node.train.data import Dataset, dataset_from_arrays, load_dataset
from swarmnode.node.train.errors import ConfigError
from swarmnode.node.train.model import KINDS, UserModel, build_model
from swarmnode.node.train.user_code import call_with, describe, is_ref, load_ref

DATA_KINDS = ("digits", "synthetic", "signal")


def source_name(source: Any) -> str:
    """How a run names its model or data (progress lines, summaries, checkpoints' metadata)."""
    return describe(source)


def resolve_data(source: Any, seed: int) -> Dataset:
    """The `Dataset` that `source` (a `--data` value, or a Python object) names."""
    if isinstance(source, Dataset):
        return source
    if isinstance(source, str) and not is_ref(source, DATA_KINDS):
        return load_dataset(source)
    name = f"data {describe(source)}"
    if isinstance(source, str):
        source = load_ref(source, "--data")
    if callable(source):
        source = call_with(source, name, {"seed": seed})
    if isinstance(source, Dataset):
        return source
    return dataset_from_arrays(source, name, any_targets=True)


def resolve_model(source: Any, data: Dataset, backend: Backend, seed: int) -> Any:
    """The `TrainableModel` that `source` names: a built-in spec's `Sequential`, or the user's
    model (made by their factory, or given as an object) behind a checked `UserModel`."""
    if isinstance(source, str) and not is_ref(source, KINDS):
        _refuse_file_path(source, "--model")
        return build_model(source, data.input_shape, data.n_classes, backend, seed)
    name = f"model {describe(source)}"
    if isinstance(source, str):
        source = load_ref(source, "--model")
    if isinstance(source, type) or (callable(source) and not hasattr(source, "loss_and_grad")):
        # a factory: a function, or the model's class itself (`own_model:Net`)
        offered = {
            "input_shape": data.input_shape,
            "n_classes": data.n_classes,
            "seed": seed,
            "device": _device_name(backend),
        }
        source = call_with(source, f"{name} (the factory)", offered)
    if isinstance(getattr(source, "params", None), FlatParams) and hasattr(source, "backend"):
        return source  # a built-in model (Sequential), built by the caller
    return UserModel(source, name)


def _refuse_file_path(spec: str, option: str) -> None:
    """`my_model.py:build` or `src/my_model:build`: a file path where a module name belongs."""
    left, sep, right = spec.strip().partition(":")
    if sep and right.isidentifier() and (left.endswith(".py") or "/" in left or "\\" in left):
        module = left.replace("\\", "/").rsplit("/", 1)[-1].removesuffix(".py")
        raise ConfigError(
            f"{option} {spec!r}: name the module, not its file: put its folder on PYTHONPATH "
            f"(or run from it) and give {module}:{right}"
        )


def check_device(model: Any, backend: Backend, device: str) -> None:
    """A user's model lives where its `params` are; `--device auto` follows it, an explicit
    `--device` that differs is an error rather than a silent run elsewhere."""
    if device.strip().lower() == "auto" or model.backend == backend:
        return
    raise ConfigError(
        f"--device {device}: the model's params live on {_device_name(model.backend)} "
        "(build it there, or use --device auto)"
    )


def _device_name(backend: Backend) -> str:
    return f"cuda:{backend.device_id}" if backend.is_gpu else "cpu"
