"""Outline and range selection (pure): the §2.6 section refs, parser-backed headings, paging."""

from __future__ import annotations

import hashlib
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from config.exceptions import Invalid
from knowledge.structure import (
    SECTION_REF,
    join_document,
    normalise_newlines,
    outline,
    select_range,
    slugify,
    split_document,
)


def refs(text: str) -> list[str]:
    return [heading.section_ref for heading in outline(text).headings]


# --- §2.6 worked examples ----------------------------------------------------------------------


def test_section_refs_follow_heading_depth_not_stack_length():
    assert refs("# A\n#### D\n### C\n## B\n") == [
        "root.h1[1]",
        "root.h1[1].h4[1]",
        "root.h1[1].h3[1]",
        "root.h1[1].h2[1]",
    ]


def test_section_refs_count_ordinals_per_parent():
    text = "# First\n## A\n### Deep\n## B\n# Second\n### Skipped\n"
    assert refs(text) == [
        "root.h1[1]",
        "root.h1[1].h2[1]",
        "root.h1[1].h2[1].h3[1]",
        "root.h1[1].h2[2]",
        "root.h1[2]",
        "root.h1[2].h3[1]",
    ]


def test_refs_ignore_titles_and_shift_with_neighbours():
    assert refs("# X\n## Same\n## Same\n") == ["root.h1[1]", "root.h1[1].h2[1]", "root.h1[1].h2[2]"]
    assert refs("# X\n## New\n## Same\n## Same\n")[3] == "root.h1[1].h2[3]"


# --- headings ----------------------------------------------------------------------------------


def test_fenced_and_indented_code_is_not_a_heading():
    text = "# Real\n```sh\n# not a heading\n```\n~~~\n## nor this\n~~~\n\n    # indented code\n## Also real\n"
    assert [h.title for h in outline(text).headings] == ["Real", "Also real"]


def test_unclosed_fence_hides_everything_after_it():
    assert [h.title for h in outline("# A\n```\n# B\n").headings] == ["A"]


def test_setext_headings_count_and_content_starts_after_the_underline():
    text = "Title\n=====\nintro\n\nSub\npart\n---\nbody\n"
    first, second = outline(text).headings
    assert (first.level, first.title, first.start_line, first.end_line, first.content_start_line) == (
        1,
        "Title",
        1,
        8,
        3,
    )
    assert (second.level, second.title, second.start_line, second.content_start_line) == (2, "Sub part", 5, 8)
    assert second.end_line == 8


def test_heading_text_goes_through_inline_markdown_and_links():
    text = "# The *quick* [**brown**](http://x) `fox` ![jumps](i.png) &amp; <b>co</b>\n## [ref][1]\n\n[1]: http://y\n"
    first, second = outline(text).headings
    assert first.title == "The quick brown fox jumps & co"
    assert first.anchor == "the-quick-brown-fox-jumps-co"
    assert second.title == "ref"


def test_empty_headings_are_dropped():
    text = "# A\n#\n##   \n### <span></span>\n## B\n"
    assert [(h.title, h.section_ref) for h in outline(text).headings] == [
        ("A", "root.h1[1]"),
        ("B", "root.h1[1].h2[1]"),
    ]


def test_headings_in_quotes_and_lists_count():
    assert [h.title for h in outline("> # Quoted\n- ## Listed\n").headings] == ["Quoted", "Listed"]


def test_front_matter_is_not_markdown():
    text = "---\ntitle: Setup\ntags: [a]\n---\n# Setup\nbody\n"
    (heading,) = outline(text).headings
    assert (heading.title, heading.start_line, heading.end_line) == ("Setup", 5, 6)


def test_thematic_break_then_text_then_dashes_is_still_a_heading_without_yaml():
    # Not a mapping, so not front matter: markdown rules apply (setext heading).
    assert [h.title for h in outline("---\njust words\n---\n").headings] == ["just words"]


def test_sections_breadcrumbs_occurrences_and_chars():
    text = "intro\n# Guide\ntext\n## Install\na\n## Install\nb\n# Guide\n## Install\n"
    found = outline(text)
    assert found.line_count == 9
    rows = [(h.heading_path, h.occurrence, h.start_line, h.end_line) for h in found.headings]
    assert rows == [
        ("Guide", 1, 2, 7),
        ("Guide > Install", 1, 4, 5),
        ("Guide > Install", 2, 6, 7),
        ("Guide", 2, 8, 9),
        ("Guide > Install", 3, 9, 9),
    ]
    lines = text.split("\n")
    for heading in found.headings:
        raw = "\n".join(lines[heading.start_line - 1 : heading.end_line]) + "\n"
        assert heading.chars == len(raw)
    assert len("intro\n") + sum(h.chars for h in found.headings if h.level == 1) == len(text)


def test_chars_without_a_final_newline():
    (heading,) = outline("# A\nxy").headings
    assert heading.chars == len("# A\nxy")


def test_crlf_is_normalised():
    lf = "# A\ntext\n## B\nmore\n"
    assert outline(lf.replace("\n", "\r\n")) == outline(lf)


def test_lone_carriage_return_is_not_a_line_break():
    found = outline("# A\rstill line one\n# B\n")
    assert [(h.title, h.start_line) for h in found.headings] == [("A still line one", 1), ("B", 2)]


def test_max_depth_filters_headings_but_not_section_bounds():
    found = outline("# A\n## B\n### C\n# D\n")
    assert [h.title for h in found.up_to(2)] == ["A", "B", "D"]
    assert [h.title for h in found.up_to(1)] == ["A", "D"]
    assert found.up_to(2)[1].end_line == 3


@pytest.mark.parametrize(
    ("title", "anchor"),
    [("Hello, World!", "hello-world"), ("Ünïcode Straße", "ünïcode-straße"), ("!!!", "section"), ("a - b", "a---b")],
)
def test_anchor_slugs(title, anchor):
    assert slugify(title) == anchor


def test_line_model():
    assert split_document("a\nb\n") == (["a", "b"], True)
    assert split_document("a\nb") == (["a", "b"], False)
    assert split_document("") == ([], True)
    assert split_document("\n") == ([""], True)
    assert split_document("a\r\nb\r\n") == (["a", "b"], True)
    assert split_document("a\r\r\nb\rc") == (["a", "b\rc"], False)  # CRs before LF are line-ending noise
    assert normalise_newlines(normalise_newlines("x\r\r\n")) == normalise_newlines("x\r\r\n") == "x\n"
    assert join_document(["a", ""], False) == "a\n\n"  # the empty last line survives


# --- ranges ------------------------------------------------------------------------------------

DOC = "# Guide\nintro\n## Install\nstep 1\nstep 2\nstep 3\n## Use\nrun it\n## Install\nagain\n"


def md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


def test_range_by_section_ref_with_context():
    found = select_range(DOC, section_ref="root.h1[1].h2[1]", context_lines=1)
    assert (found.start_line, found.end_line, found.context_start_line, found.context_end_line) == (3, 6, 2, 7)
    assert found.content == "intro\n## Install\nstep 1\nstep 2\nstep 3\n## Use"
    assert found.numbered_content.splitlines()[0] == "2: intro"
    assert found.content_md5 == md5("## Install\nstep 1\nstep 2\nstep 3")
    assert found.source_range is None and "source_range" not in found.as_dict()


def test_range_by_heading_path_and_occurrence():
    assert select_range(DOC, heading_path="Guide > Install", occurrence=2).start_line == 9
    assert select_range(DOC, heading_path="  Guide>Install ").start_line == 3
    # section_ref wins over heading_path, which wins over lines
    assert (
        select_range(DOC, section_ref="root.h1[1].h2[2]", heading_path="Guide", start_line=1, end_line=1).start_line
        == 7
    )


def test_range_by_lines_clamps_context_and_omits_numbers_on_request():
    found = select_range(DOC, start_line=1, end_line=2, context_lines=5, include_line_numbers=False)
    assert (found.context_start_line, found.context_end_line) == (1, 7)
    assert found.numbered_content is None and "numbered_content" not in found.as_dict()
    assert found.content_md5 == md5("# Guide\nintro")


def test_paging_moves_the_start_and_caps_the_length():
    found = select_range(DOC, section_ref="root.h1[1]", offset_lines=2, max_lines=3, context_lines=0)
    assert (found.start_line, found.end_line) == (3, 5)
    assert found.source_range.__dict__ == {"start_line": 1, "end_line": 10, "omitted_before": 2, "omitted_after": 5}
    assert found.content == "## Install\nstep 1\nstep 2"
    last = select_range(DOC, start_line=1, end_line=10, offset_lines=9, context_lines=0)
    assert (last.start_line, last.end_line, last.source_range.omitted_after) == (10, 10, 0)


@pytest.mark.parametrize(
    ("kwargs", "code", "message"),
    [
        ({}, "range_required", "Provide start_line + end_line, section_ref, or heading_path."),
        ({"start_line": 3}, "range_required", "Provide start_line + end_line"),
        ({"start_line": 3, "end_line": 2}, "invalid_range", "end_line must be greater than or equal to start_line"),
        ({"start_line": 1, "end_line": 11}, "range_out_of_bounds", "Requested range exceeds document length"),
        ({"start_line": 1, "end_line": 2, "offset_lines": 2}, "invalid_offset", "offset_lines must be less than"),
        ({"section_ref": "root.h1[9]"}, "section_not_found", "Section ref not found: root.h1[9]"),
        ({"section_ref": "h1"}, "section_not_found", "refs look like"),
        ({"heading_path": "Nope"}, "heading_not_found", "Heading not found: Nope"),
        (
            {"heading_path": "Guide > Install", "occurrence": 3},
            "occurrence_not_found",
            'Heading "Guide > Install" occurrence 3 not found (matches: 2)',
        ),
    ],
)
def test_range_errors_are_coded(kwargs, code, message):
    with pytest.raises(Invalid) as caught:
        select_range(DOC, **kwargs)
    assert caught.value.code == code
    assert message in caught.value.message


def test_empty_document_has_no_lines():
    assert outline("").line_count == 0
    with pytest.raises(Invalid) as caught:
        select_range("", start_line=1, end_line=1)
    assert caught.value.code == "range_out_of_bounds"


# --- properties --------------------------------------------------------------------------------

TITLE = st.text(alphabet="abcXYZ *_`[]()!#-=:>", min_size=0, max_size=12)
LINE = st.one_of(
    st.builds(lambda level, title: "#" * level + " " + title, st.integers(1, 7), TITLE),
    st.sampled_from(["", "text", "===", "---", "```", "~~~", "    # code", "> # quoted", "- ## item", "* * *", "\t#x"]),
    st.text(alphabet="ab #=-`~>\r\t", max_size=10),
)
DOCUMENT = st.builds(
    lambda lines, newline, final: newline.join(lines) + (newline if final else ""),
    st.lists(LINE, max_size=25),
    st.sampled_from(["\n", "\r\n"]),
    st.booleans(),
)


@settings(max_examples=250, deadline=None, database=None)
@given(DOCUMENT)
def test_outline_lines_are_always_in_range(text):
    found = outline(text)
    lines, _ = split_document(text)
    assert join_document(*split_document(text)) == normalise_newlines(text)  # the line model loses nothing
    assert found.line_count == len(lines)
    seen_refs = set()
    for heading in found.headings:
        assert 1 <= heading.start_line <= heading.end_line <= found.line_count
        assert heading.start_line < heading.content_start_line <= heading.end_line + 1
        assert heading.title and heading.title == heading.title.strip()
        assert heading.heading_path.endswith(heading.title)
        assert SECTION_REF.fullmatch(heading.section_ref)
        assert int(re.findall(r"\.h(\d)\[", heading.section_ref)[-1]) == heading.level
        assert heading.section_ref not in seen_refs
        seen_refs.add(heading.section_ref)
        section = "\n".join(lines[heading.start_line - 1 : heading.end_line])
        assert heading.chars in (len(section), len(section) + 1)
    assert outline(normalise_newlines(text)) == found


@settings(max_examples=150, deadline=None, database=None)
@given(DOCUMENT, st.integers(0, 20), st.integers(0, 5), st.integers(1, 8))
def test_every_section_selects_its_own_lines(text, context, offset, limit):
    found = outline(text)
    lines, _ = split_document(text)
    for heading in found.headings:
        by_ref = select_range(text, section_ref=heading.section_ref, context_lines=context)
        by_path = select_range(text, heading_path=heading.heading_path, occurrence=heading.occurrence)
        assert (by_ref.start_line, by_ref.end_line) == (heading.start_line, heading.end_line)
        assert by_path.content_md5 == by_ref.content_md5
        assert 1 <= by_ref.context_start_line <= by_ref.start_line <= by_ref.end_line <= by_ref.context_end_line
        assert by_ref.context_end_line <= found.line_count
        assert by_ref.content == "\n".join(lines[by_ref.context_start_line - 1 : by_ref.context_end_line])
        if offset < heading.end_line - heading.start_line + 1:
            paged = select_range(text, section_ref=heading.section_ref, offset_lines=offset, max_lines=limit)
            source = paged.source_range
            assert paged.start_line == heading.start_line + offset
            assert paged.end_line - paged.start_line + 1 <= limit
            assert source.omitted_before + (paged.end_line - paged.start_line + 1) + source.omitted_after == (
                heading.end_line - heading.start_line + 1
            )
