"""docs/options.md is generated from the option table (scripts/docs/options.py): regenerated
here, it must be the page in the repository, so that the reference can never drift from the
options that exist."""

from __future__ import annotations

import pytest
from swarmnode.node.settings import LOG_OPTIONS, START_OPTIONS

from scripts.docs import options as page

pytestmark = pytest.mark.timeout(60)


def test_docs_options_md_is_what_the_table_gives():
    want = page.render()
    have = page.PAGE.read_text() if page.PAGE.exists() else ""
    assert have == want, (
        f"docs/options.md differs from the option table: run `{page.COMMAND}` and commit the page"
    )


def test_every_setting_has_its_row_with_every_name():
    text = page.render()
    for opt in [*START_OPTIONS, *LOG_OPTIONS]:
        row = next((line for line in text.splitlines() if line.startswith(f"| `{opt.key}` |")), "")
        assert bool(row) != opt.hidden, opt.key  # a row for each visible option, none hidden
        if row:
            assert f"`{opt.flag}" in row and f"`{opt.env}`" in row, opt.key
    assert "| `sync-every` | `--sync-every K` | `sync-every` | `SWARMNODE_SYNC_EVERY` | " in text
    assert "`sync_every=` | `10` |" in text


def test_the_small_verbs_are_listed_with_their_options():
    text = page.render()
    for verb, flag in [("status", "--peer"), ("demo", "--quick"), ("chaos", "--report")]:
        section = text.split(f"### swarmnode {verb}")[1].split("###")[0]
        assert f"`{flag}" in section, verb
    assert "`--out DIR`" in text.split("### swarmnode keygen")[1]
    assert "SUPPRESS" not in text  # a hidden flag has no row


def test_a_cell_cannot_break_its_table():
    assert page.cell("a|b `c|d` <e> x_1 '_'") == r"a\|b `c\|d` &lt;e&gt; x_1 '\_'"


def test_check_fails_on_a_stale_page(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(page, "PAGE", tmp_path / "options.md")
    (tmp_path / "options.md").write_text("stale\n")
    monkeypatch.setattr(page, "ROOT", tmp_path)
    assert page.main(["--check"]) == 1
    assert page.COMMAND in capsys.readouterr().err
    assert page.main([]) == 0 and page.main(["--check"]) == 0
