"""Export a trained model to another inference engine and translate with the export.

`ctranslate2`: a Transformer checkpoint as a CTranslate2 `TransformerSpec` model folder
(`export_ctranslate2`), with the checkpoint's tokenisers beside it; `ctranslate2_translator`:
translate with that folder (`CTranslate2Translator`), the search settings meaning what they
mean for the project's own search. The `ctranslate2` package is an optional extra (`pip
install 'seq2seq-attention[export]'`), imported only when a function here needs it.
"""

from seq2seq.export.ctranslate2 import (
    QUANTIZATIONS,
    AlignmentHead,
    ExportError,
    export_ctranslate2,
)

__all__ = ["QUANTIZATIONS", "AlignmentHead", "ExportError", "export_ctranslate2"]
