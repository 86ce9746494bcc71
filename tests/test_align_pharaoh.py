"""The Pharaoh format: sure and possible links, 0- and 1-based files, errors that point."""

from __future__ import annotations

import io

import pytest

from seq2seq.align.pharaoh import (
    Links,
    check_links_fit,
    format_links,
    parse_links,
    read_links,
    write_links,
)


def test_sure_links_are_also_possible():
    links = Links(sure=frozenset({(0, 0)}), possible=frozenset({(1, 2)}))
    assert links.sure == {(0, 0)}
    assert links.possible == {(0, 0), (1, 2)}
    assert Links.of([(2, 1), (0, 0)]) == Links(sure=frozenset({(0, 0), (2, 1)}))
    assert Links.of([(2, 1)]).possible == {(2, 1)}


def test_every_convention_for_sure_and_possible_links_is_read():
    links = parse_links("0-0 1-2-P 2p1 3-3-S 4-1-p")
    assert links.sure == {(0, 0), (3, 3)}
    assert links.possible == {(0, 0), (3, 3), (1, 2), (2, 1), (4, 1)}


def test_a_link_given_as_sure_and_as_possible_is_sure():
    links = parse_links("1-1-P 1-1")
    assert links.sure == {(1, 1)} and links.possible == {(1, 1)}


def test_an_empty_line_is_a_pair_without_links():
    assert parse_links("") == Links()
    assert parse_links("   \t ") == Links()


def test_one_based_files_are_shifted_to_zero_based():
    links = parse_links("1-1 3p2 2-4-P", one_based=True)
    assert links.sure == {(0, 0)}
    assert links.possible == {(0, 0), (2, 1), (1, 3)}


def test_index_zero_in_a_one_based_file_is_refused():
    with pytest.raises(ValueError, match=r"line 4: link '0-2' has index 0 .*1-based"):
        parse_links("1-1 0-2", one_based=True, where="line 4")


@pytest.mark.parametrize("token", ["1-", "a-b", "1-2-X", "1:2", "-1-2", "1-2-P-S", "1P2x", "1s2"])
def test_a_malformed_link_names_the_line_and_the_token(token):
    with pytest.raises(ValueError, match=rf"line 3: malformed link '{token}' \(expected i-j"):
        parse_links(f"0-0 {token}", where="line 3")


def test_reading_a_file_names_the_file_and_the_line(tmp_path):
    path = tmp_path / "gold.align"
    path.write_text("0-0 1-1\n\n0-1 x\n", encoding="utf-8")
    with pytest.raises(ValueError, match=rf"{path} line 3: malformed link 'x'"):
        read_links(path)


def test_reading_a_file_keeps_empty_pairs_and_windows_line_ends(tmp_path):
    path = tmp_path / "gold.align"
    path.write_bytes(b"0-0 1-1-P\r\n\r\n2p0\r\n")
    assert read_links(path) == [
        Links(frozenset({(0, 0)}), frozenset({(1, 1)})),
        Links(),
        Links(possible=frozenset({(2, 0)})),
    ]
    assert read_links(tmp_path / "gold.align", one_based=False)[1] == Links()


def test_links_are_written_sorted_and_read_back():
    links = Links(sure=frozenset({(2, 0), (0, 1)}), possible=frozenset({(1, 1), (0, 0)}))
    line = format_links(links)
    assert line == "0-0-P 0-1 1-1-P 2-0"
    assert parse_links(line) == links
    assert format_links(Links()) == ""


def test_write_links_gives_one_line_per_pair():
    stream = io.StringIO()
    write_links(stream, [Links.of([(0, 0), (1, 2)]), Links(), Links.of([(3, 1)])])
    assert stream.getvalue() == "0-0 1-2\n\n3-1\n"


def test_a_link_beyond_its_sentence_is_refused_with_a_hint():
    check_links_fit(Links.of([(2, 1)]), source_words=3, target_words=2, where="gold line 1")
    with pytest.raises(
        ValueError, match=r"gold line 2: link 3-1 lies outside .*3 source words.*1-based"
    ):
        check_links_fit(Links.of([(3, 1)]), source_words=3, target_words=2, where="gold line 2")
