"""Probe files: parsing, locating linked words, and turning word links into piece links."""

from __future__ import annotations

import pytest

from seq2seq.metrics.alignment_accuracy import Link
from seq2seq.special_tokens import EOS_PIECE
from seq2seq.visualise.probes import (
    Probe,
    encode_probe,
    find_text,
    load_probes,
    parse_probe_line,
    piece_ranges,
    probes_for,
    swap_probe,
)


class _TableTokenizer:
    """Cuts a text into the pieces listed for it; ids count up from 4."""

    def __init__(self, pieces_of: dict[str, list[str]]):
        self.pieces_of = pieces_of

    def pieces(self, text: str) -> list[str]:
        return list(self.pieces_of[text])

    def encode(self, text: str) -> list[int]:
        return [4 + i for i in range(len(self.pieces_of[text]))]


def test_a_line_becomes_a_probe_with_one_to_many_links():
    probe = parse_probe_line("晚安！\tGood night!\tGood=晚安 night=晚安 !=！ x=晚+安", "f:1")
    assert probe == Probe(
        "晚安！",
        "Good night!",
        (("Good", ("晚安",)), ("night", ("晚安",)), ("!", ("！",)), ("x", ("晚", "安"))),
    )


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("我爱中国。\tI love China.", "f:3: expected 3 non-empty tab-separated columns"),
        ("我爱中国。\tI love China.\tI我", "f:3: link 'I我' is not TARGET=SOURCE"),
        ("我爱中国。\tI love China.\tI=我+", "f:3: link 'I=我\\+' is not"),
    ],
)
def test_malformed_lines_name_the_file_and_line(line, message):
    with pytest.raises(ValueError, match=message):
        parse_probe_line(line, "f:3")


def test_find_text_matches_whole_latin_words_and_counts_no_spaces():
    assert find_text("It is I.", "I") == range(4, 5)  # not the I of "It"
    assert find_text("我爱中国。", "中国") == range(2, 4)
    assert find_text("晚安！", "!") == range(2, 3)  # NFKC: ！ is !
    assert find_text("I think I can.", "I#2") == range(6, 7)
    with pytest.raises(ValueError, match="occurs 2 times"):
        find_text("I think I can.", "I")
    with pytest.raises(ValueError, match="does not occur"):
        find_text("I love China.", "Chin")


def test_piece_ranges_follow_the_pieces_and_refuse_pieces_of_another_text():
    ranges = piece_ranges("I can't go", ["▁I", "▁can", "'", "t", "▁go"])
    assert ranges == [range(0, 1), range(1, 4), range(4, 5), range(5, 6), range(6, 8)]
    with pytest.raises(ValueError, match="do not spell"):
        piece_ranges("I can't go", ["▁I", "▁can", "▁go"])


def test_word_links_become_links_from_a_first_piece_to_overlapping_source_pieces():
    probe = parse_probe_line(
        "我不会说日语。\tI can't speak Japanese.\tI=我 can't=不会 Japanese=日语 .=。", "f:1"
    )
    source = _TableTokenizer({probe.source: ["我不", "会", "说", "日", "语", "。"]})
    target = _TableTokenizer(
        {probe.reference: ["▁I", "▁can", "'", "t", "▁speak", "▁Japan", "ese", "."]}
    )
    encoded = encode_probe(probe, source, target)
    assert encoded.links == [
        Link(0, frozenset({0})),  # I → 我不 (the piece holding 我)
        Link(1, frozenset({0, 1})),  # can't, by its first piece ▁can → 我不 and 会
        Link(5, frozenset({3, 4})),  # Japanese, by ▁Japan → 日, 语
        Link(7, frozenset({5})),
    ]
    assert encoded.source_pieces[-1] == EOS_PIECE and encoded.target_pieces[-1] == EOS_PIECE
    assert encoded.source_ids == [4, 5, 6, 7, 8, 9]


def test_a_link_that_cannot_be_found_names_the_probe():
    probe = parse_probe_line("我爱中国。\tI love China.\tI=我 Japan=日本", "f:1")
    source = _TableTokenizer({probe.source: ["我", "爱", "中国", "。"]})
    target = _TableTokenizer({probe.reference: ["▁I", "▁love", "▁China", "."]})
    with pytest.raises(ValueError, match="probe '我爱中国。' / 'I love China.': 'Japan'"):
        encode_probe(probe, source, target)


def test_swapping_a_probe_reverses_its_links_and_merges_shared_targets():
    probe = parse_probe_line("晚安！\tGood night!\tGood=晚安 night=晚安 !=！", "f:1")
    assert swap_probe(probe) == Probe(
        "Good night!", "晚安！", (("晚安", ("Good", "night")), ("！", ("!",)))
    )


def test_the_built_in_list_starts_with_the_notes_example_and_every_probe_is_consistent():
    probes = probes_for("zh", "en")
    assert probes[0] == Probe(
        "我爱中国。",
        "I love China.",
        (("I", ("我",)), ("love", ("爱",)), ("China", ("中国",)), (".", ("。",))),
    )
    assert len(probes) >= 9
    for probe in probes:  # every link is found exactly once on both sides
        for target, sources in probe.links:
            find_text(probe.reference, target)
            for source in sources:
                find_text(probe.source, source)
    assert probes_for("cmn", "en") == probes
    assert probes_for("zh-Hans", "EN") == probes
    assert probes_for("en", "zh") == [swap_probe(probe) for probe in probes]
    assert probes_for("de", "en") == []


def test_a_probe_file_from_the_config_replaces_the_built_in_list(tmp_path):
    path = tmp_path / "mine.tsv"
    path.write_text("# comment\n\n猫。\tA cat.\tcat=猫 .=。\n", encoding="utf-8")
    assert probes_for("zh", "en", path) == load_probes(path)
    assert [probe.source for probe in load_probes(path)] == ["猫。"]
    with pytest.raises(FileNotFoundError, match="logging.probe_file"):
        probes_for("zh", "en", tmp_path / "missing.tsv")
