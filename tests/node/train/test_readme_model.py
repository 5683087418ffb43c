"""The models the docs show, run as written there: the README's short example (a whole script,
`import swarmnode` and all) and the models page's full numpy model (docs/models.md, "Your model
in our loop")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from swarmnode.node.train.build import build_trainer
from swarmnode.node.train.config import NodeConfig

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "README.md"
MODELS = ROOT / "docs" / "models.md"


def _blocks(page: Path, heading: str) -> list[str]:
    """The ```python blocks of the section `heading` of `page`, up to the next ## heading."""
    text = page.read_text()
    section = text[text.index(f"\n{heading}\n") :]
    end = section.find("\n## ", 1)
    section = section if end < 0 else section[:end]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_the_models_pages_numpy_model_trains_as_written(tmp_path, monkeypatch: pytest.MonkeyPatch):
    code = _blocks(MODELS, "## Your model in our loop")[0]
    (tmp_path / "my_model.py").write_text(code)
    monkeypatch.syspath_prepend(str(tmp_path))
    trainer, data, _ = build_trainer(NodeConfig(model="my_model:build", device="cpu").validate())
    for _ in range(1500):
        trainer.step()
    assert trainer.evaluate(data.X_test, data.y_test)[1] >= 0.93
    assert "swarmnode" not in code  # plain numpy: nothing of ours to import


@pytest.mark.timeout(60)
def test_the_readmes_short_example_runs_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    (code,) = _blocks(README, "## Your own model, in our loop")
    first = README.read_text().splitlines().index("import swarmnode")
    assert first < 60, f"the first `import swarmnode` is on line {first + 1}, not the first screen"
    assert len(code.splitlines()) <= 30, "a few lines"
    exec(compile(code, str(README), "exec"), {"__name__": "__main__"})  # a peer, alone, 1500 steps
    printed = re.search(r"test accuracy ([\d.]+)%", capsys.readouterr().out)
    assert printed is not None and float(printed.group(1)) >= 90.0


@pytest.mark.timeout(60)
def test_the_readmes_own_loop_block_runs_as_written() -> None:
    # The three lines around a user's torch loop, as the README shows them; only the seed's
    # address becomes None (this peer founds its own swarm) and the loop's names are given.
    torch = pytest.importorskip("torch")
    (code,) = _blocks(README, "## Your training loop, with the swarm added")
    assert code.count("swarm") >= 3 and len(code.splitlines()) <= 8, "three lines and a loop"
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 2)
    before = [p.detach().clone() for p in model.parameters()]
    batches = [(torch.randn(16, 8), torch.randint(0, 2, (16,))) for _ in range(30)]
    scope = {
        "swarmnode": __import__("swarmnode"),
        "model": model,
        "loader": batches,
        "loss_fn": torch.nn.functional.cross_entropy,
        "opt": torch.optim.AdamW(model.parameters(), lr=1e-2),
    }
    exec(compile(code.replace('"10.0.0.5:7070"', "None"), str(README), "exec"), scope)
    trained = list(model.parameters())
    assert all(not torch.equal(a, b.detach()) for a, b in zip(before, trained, strict=True))
    assert scope["swarm"].step_count == len(batches)
