# frozen_string_literal: true

require_relative "test_helper"

class TensorTest < Minitest::Test
  T = Densewire::Tensor

  def test_from_rows_and_views
    t = T.from_values([[1, 2.5], [-3, 0.25]])
    assert_equal ["float32", [2, 2]], [t.dtype, t.shape]
    assert_equal [[1.0, 2.5], [-3.0, 0.25]], t.rows
    assert_equal [1.0, 2.5, -3.0, 0.25], t.to_a
    assert_equal ["\x00\x00\x80?\x00\x00 @".b, "\x00\x00@\xc0\x00\x00\x80>".b], t.packed_rows
    assert t.data.frozen?
    assert_equal Encoding::BINARY, t.data.encoding
    assert_equal t, T.from_values([1, 2.5, -3, 0.25], shape: [2, 2])
  end

  def test_every_dtype_from_values
    assert_equal [0x3c00, 0xc100], T.from_values([[1, -2.5]], dtype: "float16").bits
    assert_equal [0x3f80, 0xc020], T.from_values([[1, -2.5]], dtype: "bfloat16").bits
    assert_equal [1.0, 0.1], T.from_values([[1, 0.1]], dtype: "float64").to_a
    assert_equal [-128, 127], T.from_values([[-128, 127]], dtype: "int8").to_a
    assert_equal [0, 255], T.from_values([[0, 255]], dtype: "uint8").to_a
    assert_equal [[0xb3, 0xf0]], T.from_values([[1, -1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1]], dtype: "binary").rows
  end

  def test_empty_shapes
    assert_equal [0, 0], T.from_values([]).shape
    t = T.new("".b, dtype: "float32", shape: [0, 4])
    assert_equal [[], []], [t.rows, t.packed_rows]
    z = T.new("".b, dtype: "float32", shape: [3, 0])
    assert_equal [[], [], []], z.rows
    assert_equal [[], []], T.from_values([[], []], dtype: "binary").rows
  end

  def test_value_errors_name_the_place
    e = assert_raises(Densewire::ShapeMismatchError) { T.from_values([[1, 2], [3]]) }
    assert_equal "values[1]", e.field
    e = assert_raises(Densewire::InvalidFieldError) { T.from_values([[1, "x"]]) }
    assert_equal "values[1]", e.field
    e = assert_raises(Densewire::InvalidFieldError) { T.from_values([[1, 300]], dtype: "int8") }
    assert_equal "values[1]", e.field
    assert_raises(Densewire::InvalidFieldError) { T.from_values([[1.5]], dtype: "uint8") }
    assert_raises(Densewire::ShapeMismatchError) { T.from_values([1, 2, 3], shape: [2, 2]) }
    e = assert_raises(Densewire::LengthMismatchError) { T.new("\0" * 7, dtype: "float32", shape: [2, 1]) }
    assert_equal 7, e.offset
  end

  def test_conversions_keep_bits
    t = T.from_bits([0x7fa00001, 0xffc00000, 0x80000000, 0x00000001], dtype: "float32", shape: [1, 4])
    assert_equal [0x7e00, 0xfe00, 0x8000, 0x0000], t.convert("float16").bits
    assert_equal [0x7fc0, 0xffc0, 0x8000, 0x0000], t.convert("bfloat16").bits
    wide = t.convert("float64")
    assert_equal [0x7ff4000020000000, 0xfff8000000000000, 0x8000000000000000, 0x36a0000000000000], wide.bits
    assert_equal [0x7fc00000, 0xffc00000, 0x80000000, 0x00000001], wide.convert("float32").bits
    assert_equal [0x7fd00000], T.from_bits([0x7fd0], dtype: "bfloat16", shape: [1, 1]).convert("float32").bits
    assert_equal [0x7fc02000], T.from_bits([0x7e01], dtype: "float16", shape: [1, 1]).convert("float32").bits
    assert_same t, t.convert("float32")
    assert_raises(Densewire::InvalidFieldError) { T.from_values([[1]], dtype: "int8").convert("float32") }
  end

  def test_big_endian_bytes
    t = T.from_values([[1.0]])
    assert_equal "3f800000", t.bytes("big").unpack1("H*")
    assert_equal t, T.new(t.bytes("big"), dtype: "float32", shape: [1, 1], byteorder: "big")
  end

  def test_equality_and_inspect
    a = T.from_values([[1.0]])
    assert_equal a.hash, T.from_values([[1.0]]).hash
    refute_equal a, T.from_values([[1.0]], dtype: "float64")
    assert_equal "#<Densewire::Tensor float32 1x1 (4 bytes)>", a.inspect
  end
end
