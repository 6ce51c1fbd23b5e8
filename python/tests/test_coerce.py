"""The encoders take what users have (numpy of any float dtype, lists, Tensors) and decode_base64
gives a vector without a shape."""

from __future__ import annotations

import array

import numpy as np
import pytest

import densewire

VALUES = [[1.0, -2.5, 0.1], [0.0, 3.25, -1.0]]
F32 = np.array(VALUES, dtype=np.float32)


@pytest.mark.parametrize("given", [F32, VALUES, tuple(map(tuple, VALUES)), densewire.Tensor.from_array(F32),
                                   densewire.Embeddings(densewire.Tensor.from_array(F32)), F32.astype(">f4")],
                         ids=["float32", "list", "tuple", "Tensor", "Embeddings", "big-endian"])
def test_every_encoder_takes_what_users_have(given) -> None:
    want = densewire.encode_base64(densewire.Tensor.from_array(F32))
    assert densewire.encode_base64(given) == want
    for fmt in densewire.FORMATS:
        body, headers = densewire.encode(given, fmt)
        assert densewire.decode(body, fmt, headers).tensor.array.tobytes() == F32.tobytes(), fmt
    assert densewire.decode_json(densewire.encode_json(given)).tensor.array.tobytes() == F32.tobytes()
    body, headers = densewire.encode_raw(given)
    assert densewire.decode_raw(body, headers).tensor.array.tobytes() == F32.tobytes()
    assert densewire.decode_msgpack(densewire.encode_msgpack(given)).tensor.array.tobytes() == F32.tobytes()


@pytest.mark.parametrize("np_dtype, dtype", [(np.float16, "float16"), (np.float64, "float64"), (np.float32, "float32"),
                                             (np.int8, "int8"), (np.uint8, "uint8")])
def test_numpy_dtypes_keep_their_type(np_dtype, dtype: str) -> None:
    a = np.array(VALUES).astype(np_dtype)
    back = densewire.decode_base64(densewire.encode_base64(a), dtype, a.shape)
    assert back.dtype == dtype and np.array_equal(back.array, a)


def test_longdouble_and_other_buffers() -> None:
    long = np.array(VALUES, dtype=np.longdouble)
    assert densewire.encode_base64(long) == densewire.encode_base64(np.array(VALUES, dtype=np.float64))
    buf = array.array("f", VALUES[0])
    assert densewire.encode_base64(buf) == densewire.encode_base64(F32[0])


def test_dtype_converts_first() -> None:
    text = densewire.encode_base64(VALUES, dtype="bfloat16")
    assert len(densewire.decode_base64(text, "bfloat16", (2, 3)).array.tobytes()) == 12
    assert np.allclose(densewire.decode_base64(text, "bfloat16", dim=3), F32, rtol=1e-2)
    assert densewire.encode_base64(F32, dtype="binary") == densewire.encode_base64(densewire.convert(F32, "binary"))


def test_what_cannot_be_encoded_says_why() -> None:
    with pytest.raises(ValueError, match="rows of numbers of one length"):
        densewire.encode_base64([[1.0, 2.0], [3.0]])
    with pytest.raises(ValueError, match="no densewire dtype for numpy int64"):
        densewire.encode_base64(np.arange(4))
    with pytest.raises(ValueError, match=r"got an array of shape \(2, 2, 2\)"):
        densewire.encode_base64(np.zeros((2, 2, 2), np.float32))


def test_decode_base64_without_a_shape_is_one_vector() -> None:
    row = densewire.encode_base64(F32[1])
    v = densewire.decode_base64(row)
    assert v.shape == (3,) and v.dtype == np.float32 and v.tobytes() == F32[1].tobytes()
    m = densewire.decode_base64(densewire.encode_base64(F32), dim=3)
    assert m.shape == (2, 3) and m.tobytes() == F32.tobytes()
    t = densewire.decode_base64(densewire.encode_base64(F32), shape=(2, 3))
    assert isinstance(t, densewire.Tensor) and t.array.tobytes() == F32.tobytes()
    h = densewire.decode_base64(densewire.encode_base64(F32.astype(np.float16)), "float16")
    assert h.dtype == np.float16 and h.shape == (6,)


def test_decode_base64_lengths_that_do_not_fit() -> None:
    with pytest.raises(densewire.LengthMismatchError) as info:
        densewire.decode_base64(densewire.encode_base64(F32), dim=4)  # 6 values are not rows of 4
    assert info.value.offset == 24
    with pytest.raises(densewire.LengthMismatchError):
        densewire.decode_base64("AACAPwAA")  # 6 bytes: not whole float32 values
    with pytest.raises(ValueError, match="dim must be a positive integer"):
        densewire.decode_base64("AACAPw==", dim=0)
