"""Errors raised by the peer process. The CLI prints any of them as one line and exits 2."""

from __future__ import annotations

from swarmnode.kernels.errors import SwarmnodeError


class ConfigError(SwarmnodeError):
    """A command-line option or configuration value is invalid."""


class ModelSpecError(ConfigError):
    """A model spec string (`mlp:256,128`, `cnn1d:...`) cannot be parsed or built."""


class DataError(ConfigError):
    """A data set is missing, malformed, or inconsistent (arrays, lengths, dtypes, NaN)."""


class DivergedError(SwarmnodeError):
    """The training loss became NaN or Inf; the parameters are left as they were before the step."""


class CheckpointError(SwarmnodeError):
    """A checkpoint cannot be written or read back."""


class UserCodeError(SwarmnodeError):
    """The user's own model or data code (`--model MODULE:FUNCTION`, `--data MODULE:FUNCTION`, a
    model object given to `swarmnode.Peer`) raised, or returned something unusable; the message
    names the user's function and the file and line where it went wrong."""
