"""Calling the user's code: `MODULE:FUNCTION` references, and their errors told as theirs.

A user's factory (`--model own_model:build`), data source (`--data own_data:load`) or model
method that raises becomes one `UserCodeError` line that names the function and the file and
line of the user's code where it went wrong (not swarmnode's frames, not numpy's): the CLI
prints it and exits 2, a peer whose model raises mid-run fails the way a diverged one does.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
import sys
import sysconfig
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from swarmnode.node.train.errors import ConfigError, UserCodeError

# `package.module:function`: dotted identifiers, then one identifier. A model spec such as
# `mlp:128` or `cnn1d:16k5,p2` and a data spec such as `synthetic:1000,8,3` never match, since
# their right-hand side is not an identifier; `mlp:x` does, and is told apart by its kind.
_REF = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$")

# swarmnode's own folders, whose frames a user's error location skips: node/ is this file's
# grandparent; the other packages sit beside it (a repository checkout and a wheel alike).
_NODE_DIR = Path(__file__).resolve().parents[1]
_OWN_DIRS = tuple(
    str(_NODE_DIR.parent / name) + os.sep
    for name in ("kernels", "gossip", "node", "fault", "swarmnode")
)
_LIB_DIRS = tuple(
    {
        str(Path(p).resolve()) + os.sep
        for k, p in sysconfig.get_paths().items()
        if k in ("stdlib", "platstdlib", "purelib", "platlib")
    }
)


def is_ref(text: Any, builtin_kinds: tuple[str, ...] = ()) -> bool:
    """Whether `text` names user code (`MODULE:FUNCTION`), not a built-in spec of `builtin_kinds`."""
    return (
        isinstance(text, str)
        and _REF.match(text.strip()) is not None
        and text.strip().partition(":")[0] not in builtin_kinds
    )


def load_ref(ref: str, what: str) -> Callable[..., Any]:
    """The function `MODULE:FUNCTION` names. The module is imported as Python would from the
    current directory (added at the end of sys.path, so it shadows nothing) and PYTHONPATH."""
    module_name, _, func_name = ref.strip().partition(":")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.append(os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            raise ConfigError(
                f"{what} {ref!r}: no module named {exc.name!r} (put its folder on PYTHONPATH or "
                "run from it)"
            ) from None
        raise user_error(f"{what} {ref!r}: importing {module_name}", exc) from None
    except Exception as exc:  # the user's module raised on import: theirs to fix
        raise user_error(f"{what} {ref!r}: importing {module_name}", exc) from None
    fn = getattr(module, func_name, None)
    if fn is None:
        where = getattr(module, "__file__", None) or module_name
        raise ConfigError(f"{what} {ref!r}: {module_name} ({where}) has no {func_name!r}")
    if not callable(fn):
        raise ConfigError(f"{what} {ref!r}: {func_name} is a {type(fn).__name__}, not a function")
    return fn


def call_with(fn: Callable[..., Any], what: str, offered: dict[str, Any]) -> Any:
    """`fn(**the offered keywords it names)`; whatever it raises becomes a `UserCodeError`.
    A factory takes what it needs (`def build(seed=0)`) and nothing it does not."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):  # a builtin or a C callable: no signature to read
        params = {}
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    kwargs = {k: v for k, v in offered.items() if takes_any or k in params}
    return call_user(fn, what, **kwargs)


def call_user(fn: Callable[..., Any], what: str, *args: Any, **kwargs: Any) -> Any:
    """`fn(*args, **kwargs)`, with any exception it raises told as the user's (`what` raised
    ..., at FILE:LINE in FUNC)."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:
        raise user_error(what, exc) from exc


def user_error(what: str, exc: BaseException) -> UserCodeError:
    """`exc`, raised inside the user's code, as one line that names where in their code."""
    text = " ".join(str(exc).split()) or "(no message)"
    where = location(exc)
    at = f", at {where}" if where else ""
    return UserCodeError(f"{what} raised {type(exc).__name__}: {text}{at}")


def location(exc: BaseException) -> str:
    """`FILE:LINE in FUNC` of the innermost frame in the user's own code: not swarmnode's, not
    the standard library's or an installed package's (numpy raising inside their call points
    at their call); failing that, the innermost frame outside swarmnode."""
    if isinstance(exc, SyntaxError) and exc.filename:  # the frames are importlib's
        return f"{exc.filename}:{exc.lineno}"
    frames = traceback.extract_tb(exc.__traceback__)
    own = [f for f in frames if not f.filename.startswith(_OWN_DIRS)]
    theirs = [
        f for f in own if not f.filename.startswith(_LIB_DIRS) and not f.filename.startswith("<")
    ]
    for pool in (theirs, own):
        if pool:
            f = pool[-1]
            return f"{f.filename}:{f.lineno} in {f.name}"
    return ""


def site(fn: Any) -> str:
    """`FILE:LINE` where the function `fn` (a method of the user's) is defined; '' if unknown."""
    fn = getattr(fn, "__func__", fn)
    try:
        return f"{inspect.getsourcefile(fn)}:{inspect.getsourcelines(fn)[1]}"
    except (TypeError, OSError):  # a builtin, a C extension, a lambda typed in a REPL
        return ""


def describe(obj: Any) -> str:
    """A short name of a model or data object given in Python (for messages and checkpoints):
    a string as it is, else `module:qualname` of the function or of the object's class."""
    if isinstance(obj, str):
        return obj
    target = obj if inspect.isfunction(obj) or inspect.isclass(obj) else type(obj)
    module = getattr(target, "__module__", None)
    qualname = getattr(target, "__qualname__", type(obj).__name__)
    if module in (None, "builtins"):  # a dict or tuple of arrays: no module to name
        return f"<{qualname}>"
    return f"{module}:{qualname}"
