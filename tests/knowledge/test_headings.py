"""The heading scanner against the CommonMark parse it stands in for.

`headings._scan` either answers exactly what markdown-it-py finds or gives up (None); these
tests check both halves: it agrees wherever it answers, and it does answer for ordinary
documents, so the fast path is really taken.
"""

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from knowledge import headings
from knowledge.headings import RawHeading, raw_headings

CORPUS = Path(__file__).resolve().parents[2] / "bench" / "quality" / "corpus"


def scanned(text: str) -> list[RawHeading] | None:
    return headings._scan(headings._markdown_source(text))


def parsed(text: str) -> list[RawHeading]:
    return headings._parsed(headings._markdown_source(text))


@pytest.mark.parametrize(
    "text",
    [
        "# A\ntext\n## B ##\n### C \\#\n#no\n####### seven\n#\n# #\n",
        "```\n# code\n```\n# after\n",
        "````md\n```\n# still code\n```\n````\n# out\n",
        "~~~\n# code\n",  # an unclosed fence runs to the end
        "```a`b\n# heading: that was no fence\n",
        "para\nmore\n===\n\n---\n\ntext\n---\n***\n===\n",
        "<!--\n# commented\n-->\n# visible\n",
        "<div>\n# inside\n\n# outside\n",
        "<script>\n# js\n</script>\n## After\n",
        "| a |\n|---|\n# interrupts the table\n",
        "Title *with* `code` and [a link](x) &amp; ~~gone~~\n===\n",
        "1. Step\n   ```sh\n   # comment\n   ```\n# Next\n",
        "---\ntitle: x\n---\n# After front matter\n",
        "x\0y\n# nul\0here\n",
    ],
)
def test_scanner_answers_and_agrees_on_top_level_constructs(text):
    assert scanned(text) is not None
    assert scanned(text) == parsed(text)


@pytest.mark.parametrize(
    "text",
    [
        "> # quoted\n",
        "- # listed\n",
        "- item\n\n    ```\n  # inside a list's fence\n    ```\n",  # 4-space fence in a list item
        "- foo\n  ---\n",  # a setext heading inside a list item
        "- a\n  <!--\n# x\n-->\n",  # the list item ends before the comment does
        "text\n<span>\n# x\n",  # a lone tag continues the paragraph
        "# [ref]\n\n[ref]: /url\n",  # a reference link in a title
        "| a |\n|---|\nfoo\n---\n",  # a table row above dashes
    ],
)
def test_scanner_gives_up_where_containers_or_references_decide(text):
    assert scanned(text) is None
    assert raw_headings(text) == parsed(text)  # and the answer comes from the parser


PIECES = st.sampled_from(
    [
        "",
        "text",
        "more *text*",
        "# h",
        "## h ##",
        "  ### indented",
        "    # code",
        "\t# tab",
        "===",
        "---",
        "--",
        "-",
        "***",
        "- - -",
        "```",
        "```py",
        "~~~",
        "````",
        "  ```",
        "    ```",
        "```x`y",
        "- item",
        "1. step",
        "   continued",
        "> quote",
        "> # q",
        "- # l",
        "<div>",
        "</div>",
        "<!--",
        "-->",
        "<span>",
        "<https://x.y>",
        "| a | b |",
        "|---|---|",
        "[x]: /u",
        "# [x]",
        "Title &amp; [l](u)",
        "---\ntitle: t\n---",
    ]
)


@settings(max_examples=600, deadline=None, database=None)
@given(st.lists(PIECES, max_size=30))
def test_scanner_agrees_with_the_parser_whenever_it_answers(pieces):
    text = "\n".join(pieces) + "\n"
    answer = scanned(text)
    if answer is not None:
        assert answer == parsed(text)
    assert raw_headings(text) == parsed(text)


def test_real_documentation_agrees_and_mostly_takes_the_fast_path():
    files = sorted(path for path in CORPUS.rglob("*") if path.is_file())
    assert len(files) > 200
    answered = 0
    for path in files:
        text = path.read_text(encoding="utf-8")
        answer = scanned(text)
        if answer is not None:
            answered += 1
            assert answer == parsed(text), path
    assert answered / len(files) > 0.7
