"""`seq2seq.bounded_files`: the limits it reads structured files within, the YAML it still
reads as before (anchors without aliases, YAML 1.2 floats), and the size checks of numbers
read from an artefact's files. The attacks themselves are in
`tests/faults/test_structured_files.py`."""

from __future__ import annotations

import pytest

from seq2seq.bounded_files import (
    StructuredFileError,
    checked_size,
    parse_yaml_text,
    read_json,
    read_yaml,
)


def test_read_json_and_read_yaml_keep_to_the_limit(tmp_path):
    path = tmp_path / "meta.json"
    path.write_text('{"a": "' + "x" * 100 + '"}', encoding="utf-8")
    with pytest.raises(StructuredFileError, match=r"over the limit of 50"):
        read_json(path, limit=50)
    assert read_json(path, limit=200) == {"a": "x" * 100}
    with pytest.raises(StructuredFileError, match=r"over the limit of 50"):
        read_yaml(path, limit=50)


def test_anchors_without_aliases_and_yaml_1_2_floats_are_read():
    assert parse_yaml_text("a: &x 1e-3\nb: 2\n", source="s") == {"a": 0.001, "b": 2}


@pytest.mark.parametrize("value", [2**62, 0, -1, True, "8", 1.5])
def test_a_size_read_from_a_file_is_checked_against_what_the_artefact_fixes(value):
    with pytest.raises(StructuredFileError, match=r"^meta.json: max_source_len "):
        checked_size(value, key="max_source_len", source="meta.json", high=512)


def test_a_size_within_the_bound_is_returned():
    assert checked_size(512, key="max_source_len", source="meta.json", high=512) == 512
