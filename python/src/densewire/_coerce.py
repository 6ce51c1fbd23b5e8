"""What the encoders accept: a densewire Tensor or Embeddings, a numpy array of any float dtype (or
int8/uint8), a list of floats or of lists, or anything ``numpy.asarray`` reads (an ``array.array``,
a CPU ``torch.Tensor``). Lists become float32, the OpenAI vector type."""

from __future__ import annotations

import numpy as np

from ._convert import convert
from ._ragged import RaggedTensor, SparseVectors
from ._tensor import Embeddings, Tensor

__all__ = ["as_tensor", "as_embeddings"]

_NATIVE = {np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int8), np.dtype(np.uint8)}


def as_tensor(x, dtype: str | None = None) -> Tensor:
    """``x`` as a Tensor; ``dtype`` converts (SPEC.md section 3) to another densewire dtype.

    >>> as_tensor([0.5, 1.0]).dtype, as_tensor([[1, 2], [3, 4]]).shape
    ('float32', (2, 2))
    >>> as_tensor(np.ones(3, dtype=np.float64), "float16").array
    array([[1., 1., 1.]], dtype=float16)
    """
    if isinstance(x, Embeddings):
        x = x.tensor
    if isinstance(x, Tensor):
        return x if dtype is None else convert(x, dtype)
    if isinstance(x, (list, tuple)):
        try:
            array = np.asarray(x, dtype=np.float32)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"a list of vectors must be rows of numbers of one length: {exc}") from None
    else:
        array = np.asarray(x)
    if array.ndim not in (1, 2):
        raise ValueError(f"a vector or an (n, d) matrix is needed, got an array of shape {array.shape}")
    if array.ndim == 1:
        array = array.reshape(1, -1)
    if array.dtype.kind == "f" and array.dtype.newbyteorder("=") not in _NATIVE:  # longdouble and the like
        array = array.astype(np.float64)
    if dtype is not None:
        return convert(array, dtype)
    if array.dtype.newbyteorder("=") not in _NATIVE:
        raise ValueError(f"no densewire dtype for numpy {array.dtype}: pass floats, int8 or uint8, or dtype= "
                         "to convert")
    return Tensor.from_array(array)


def as_embeddings(x) -> Embeddings:
    """``x`` as Embeddings (no model or usage unless it already was Embeddings)."""
    if isinstance(x, Embeddings):
        return x
    return Embeddings(x if isinstance(x, (RaggedTensor, SparseVectors)) else as_tensor(x))
