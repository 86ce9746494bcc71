"""Language codes: one reading of a code for metrics, tokenisers, data configs and probes."""

from __future__ import annotations

import pytest

from seq2seq.data.languages import base_language, is_chinese, is_unspaced_cjk

# code: (base language, Chinese, written without spaces)
CODES = {
    "zh": ("zh", True, True),
    "cmn": ("zh", True, True),
    "zh-Hans": ("zh", True, True),
    "zh-Hant": ("zh", True, True),
    "zh_TW": ("zh", True, True),
    "ZH": ("zh", True, True),
    "cmn-Hans-CN": ("zh", True, True),
    "ja": ("ja", False, True),
    "ja-JP": ("ja", False, True),
    "ko": ("ko", False, False),
    "en": ("en", False, False),
    "en_GB": ("en", False, False),
    "de": ("de", False, False),
    "": ("", False, False),
}


@pytest.mark.parametrize("code", list(CODES))
def test_each_code_reads_the_same_everywhere(code):
    base, chinese, unspaced = CODES[code]
    assert base_language(code) == base
    assert is_chinese(code) is chinese
    assert is_unspaced_cjk(code) is unspaced
