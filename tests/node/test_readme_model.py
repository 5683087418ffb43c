"""The README's "Bring your own model" code, as written there: the numpy model trains."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from swarmnode.node.train.build import build_trainer
from swarmnode.node.train.config import NodeConfig

README = Path(__file__).resolve().parents[2] / "README.md"


def _blocks() -> list[str]:
    text = README.read_text()
    section = text[text.index("## Bring your own model") :]
    section = section[: section.index("\n## ", 1)]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_the_readmes_numpy_model_trains_as_written(tmp_path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "my_model.py").write_text(_blocks()[0])
    monkeypatch.syspath_prepend(str(tmp_path))
    trainer, data, _ = build_trainer(NodeConfig(model="my_model:build", device="cpu").validate())
    for _ in range(1500):
        trainer.step()
    assert trainer.evaluate(data.X_test, data.y_test)[1] >= 0.93
    assert "swarmnode" not in _blocks()[0]  # plain numpy: nothing of ours to import
