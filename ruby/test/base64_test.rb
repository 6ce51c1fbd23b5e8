# frozen_string_literal: true

require_relative "test_helper"

class Base64Test < Minitest::Test
  B64 = Densewire::Base64

  def test_round_trip_in_both_byte_orders
    t = Densewire::Tensor.from_values([[1.0, -2.5, 0.1]])
    assert_equal "AACAPwAAIMDNzMw9", B64.encode(t)
    assert_equal "P4AAAMAgAAA9zMzN", B64.encode(t, byteorder: "big")
    assert_equal t, B64.decode("P4AAAMAgAAA9zMzN", dtype: "float32", shape: [1, 3], byteorder: "big")
    assert_equal t, B64.decode("AACAPwAAIMDNzMw9", dtype: :float32, shape: [1, 3])
  end

  def test_unpadded_and_nonzero_trailing_bits_are_accepted
    assert_equal "\x00\x00\x80?\x00\x00\x00@".b, B64.decode_bytes("AACAPwAAAEA")
    assert_equal "\x00\x00\x80?\x00\x00\x00@".b, B64.decode_bytes("AACAPwAAAEB=")
    assert_equal "\xb3".b, B64.decode_bytes("sw")
    assert_equal "\xb3".b, B64.decode_bytes("s/")
    assert_equal "\xb3\xf0".b, B64.decode_bytes("s/A")
    assert_equal "".b, B64.decode_bytes("")
  end

  def test_errors_name_the_offending_offset
    {
      "AAAA AAA" => 4, "AAAA\tAAA" => 4, "AAAA-AAA" => 4, "AAAA_AAA" => 4, "AAAAé" => 4,
      "AA=A" => 2, "A===" => 1, "AAAAA" => 4, "AAA==" => 3, "AAAA=" => 4, "=" => 0,
    }.each do |text, offset|
      error = assert_raises(Densewire::InvalidBase64Error, text) { B64.decode_bytes(text, field: "emb") }
      assert_equal [offset, "emb", "invalid_base64"], [error.offset, error.field, error.category], text
    end
  end

  def test_offsets_count_characters_of_a_string_with_non_ascii
    error = assert_raises(Densewire::InvalidBase64Error) { B64.decode_bytes("AAéA") }
    assert_equal 2, error.offset
    assert_match(/"é"/, error.message)
  end

  def test_length_is_checked_against_the_shape
    error = assert_raises(Densewire::LengthMismatchError) { B64.decode("AACAPw==", dtype: "float32", shape: [2, 1]) }
    assert_equal 4, error.offset
    error = assert_raises(Densewire::LengthMismatchError) { B64.decode("AACAPw==", dtype: "float16", shape: [1, 1]) }
    assert_equal 2, error.offset
  end

  def test_bad_arguments
    assert_raises(Densewire::UnknownDtypeError) { B64.decode("", dtype: "fp16", shape: [0, 1]) }
    assert_raises(Densewire::InvalidFieldError) { B64.decode("", dtype: "float32", shape: [0, 1], byteorder: "native") }
    assert_raises(Densewire::InvalidFieldError) { B64.decode("", dtype: "float32", shape: [0]) }
    assert_raises(Densewire::InvalidFieldError) { B64.decode("", dtype: "float32", shape: [-1, 2]) }
    assert_raises(Densewire::InvalidFieldError) { B64.decode(nil, dtype: "float32", shape: [0, 2]) }
  end

  def test_big_endian_for_every_width
    [["float16", [0x3c00, 0xc100]], ["bfloat16", [0x3f80, 0xc020]], ["float64", [0x3ff0000000000000, 0]],
     ["int8", [1, 255]], ["binary", [0xa5, 0x01]]].each do |dtype, bits|
      t = Densewire::Tensor.from_bits(bits, dtype: dtype, shape: [1, dtype == "binary" ? 16 : 2])
      be = B64.encode(t, byteorder: "big")
      assert_equal t, B64.decode(be, dtype: dtype, shape: t.shape, byteorder: "big"), dtype
      expected = Densewire::Dtype.item_bytes(dtype) == 1 ? t.data : t.data.scan(/.{#{Densewire::Dtype.item_bytes(dtype)}}/mn).map(&:reverse).join
      assert_equal expected.unpack1("H*"), B64.decode_bytes(be).unpack1("H*"), dtype
    end
  end
end
