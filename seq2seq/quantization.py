"""Dynamic int8 quantisation of a trained model, for decoding on a CPU.

Every `nn.Linear`, `nn.GRU` and `nn.LSTM` of the model is replaced by its dynamically
quantised form (PyTorch's fbgemm/x86 kernels): weights stored once as int8, symmetric, one
scale per tensor (s_W = max|W| / 127); activations quantised at every call to uint8 from
their own range (s_x = (max x − min x) / 255, zero point z_x); the products accumulated in
int32 and returned as float32:

    y ≈ s_x · s_W · ((q_x − z_x) · q_Wᵀ) + b,   q_W = round(W / s_W),  q_x = round(x / s_x) + z_x.

Embeddings, layer norms, convolutions, a plain `nn.RNN` and the attention heads'
projections (`seq2seq.models.attention.head_maps`) stay float32. The output layer over the
vocabulary, most of a decoding step's arithmetic, is quantised.

The kernels come from `torch.ao.quantization.quantize_dynamic`, which PyTorch marks as
deprecated in favour of torchao. torchao 0.18's int8 configurations were measured slower
than float32 on this project's CPU shapes (BENCHMARKS.md, "Decoding engines"), so the
older kernels are used for as long as PyTorch ships them; `QuantizationError` says so
when it no longer does.
"""

from __future__ import annotations

import warnings

import torch
from torch import nn

QUANTIZATIONS = ("float32", "int8")
QUANTISED_MODULES = {nn.Linear, nn.GRU, nn.LSTM}


class QuantizationError(ValueError):
    """A model that cannot be quantised as asked; the message says why, in one line."""


def check_quantization(quantization: str, device: torch.device) -> None:
    """QuantizationError (one line) unless `quantization` can run on `device` here."""
    if quantization not in QUANTIZATIONS:
        raise QuantizationError(
            f"quantization must be one of {', '.join(QUANTIZATIONS)}, got {quantization!r}"
        )
    if quantization == "int8":
        if device.type != "cpu":
            raise QuantizationError(f"int8 runs on the CPU only (CPU kernels), not on {device}")
        _quantize_dynamic()


def quantized(model: nn.Module, quantization: str, device: torch.device) -> nn.Module:
    """The model to decode with at `quantization`: the model itself for float32, a dynamically
    quantised copy for int8 (CPU only). The model must be in eval mode; the copy is for
    inference only (its weights cannot be trained or saved as a checkpoint)."""
    check_quantization(quantization, device)
    if quantization == "float32":
        return model
    with warnings.catch_warnings():
        # The deprecation notices of torch.ao.quantization (see the module docstring).
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", UserWarning)
        return _quantize_dynamic()(model, QUANTISED_MODULES, dtype=torch.qint8).eval()


def _quantize_dynamic():
    """PyTorch's dynamic quantisation, or QuantizationError where this build lacks it."""
    quantization = getattr(getattr(torch, "ao", None), "quantization", None)
    function = getattr(quantization, "quantize_dynamic", None)
    if function is None or not torch.backends.quantized.supported_engines:
        raise QuantizationError(
            f"int8 needs torch.ao.quantization.quantize_dynamic, which torch {torch.__version__} "
            "does not provide: decode in float32, or export the model (seq2seq-export)"
        )
    return function
