# frozen_string_literal: true

require_relative "test_helper"

class MsgpackTest < Minitest::Test
  M = Densewire::Msgpack

  def pack(obj)
    Densewire::Msgpack.library.pack(obj)
  end

  def test_keys_in_any_order_any_integer_width_unknown_keys_skipped
    body = "\x85".b + pack("data") + pack("\x00\x00\x80?".b) + pack("extra") + pack({ "x" => [1, nil, 2.5] }) +
           pack("shape") + "\x92\xcf\x00\x00\x00\x00\x00\x00\x00\x01\xd1\x00\x01".b + pack("dtype") + pack("float32") +
           pack("model") + pack("m")
    result = M.decode(body)
    assert_equal [[[1.0]], "m", nil], [result.to_a, result.model, result.usage]
  end

  def test_usage_counts_are_non_negative_integers
    t = Densewire::Tensor.from_values([[1.0]])
    body = ->(usage) { M.encode(t).sub("\x83".b, "\x84".b) + pack("usage") + pack(usage) }
    assert_equal [4, 0], M.decode(body.call({ "prompt_tokens" => 4 })).usage.to_h.values
    assert_equal [0, (2**53) - 1], M.decode(body.call({ "total_tokens" => (2**53) - 1 })).usage.to_h.values
    [-1, 2.5, 2.0, "4", nil, 2**53].each do |count|
      error = assert_raises(Densewire::InvalidFieldError, count.inspect) { M.decode(body.call({ "total_tokens" => count })) }
      assert_equal "usage.total_tokens", error.field
    end
  end

  def test_large_tensors_use_bin32_and_round_trip
    t = Densewire::Tensor.new(Random.new(1).bytes(70_000 * 4), dtype: "float32", shape: [70_000, 1])
    body = M.encode(t)
    assert_equal "c6", body[body.index("data".b) + 4, 1].unpack1("H*")
    assert_equal t, M.decode(body).tensor
  end

  def test_declared_sizes_beyond_the_body_are_truncated_without_allocating
    huge_array = "\x81\xa1x\xdd\xff\xff\xff\xff".b
    error = assert_raises(Densewire::TruncatedError) { M.decode(huge_array) }
    assert_equal 8, error.offset
    huge_bin = "\x81\xa4data\xc6\xff\xff\xff\xf0\x00".b
    assert_equal 12, assert_raises(Densewire::TruncatedError) { M.decode(huge_bin) }.offset
    deep = ("\x81\xa1k".b * 70) + "\xc0".b
    assert_raises(Densewire::MalformedError) { M.decode(deep) }
  end

  def test_errors
    [
      ["\x81\xc4\x01k\x01".b, "malformed", 1, nil], # a bin key
      ["\x81\xa1k\xc1".b, "malformed", 3, nil], # 0xc1 is never used
      [pack({ "dtype" => 5, "shape" => [1, 1], "data" => "\0\0\0\0".b }), "invalid_field", nil, "dtype"],
      [pack({ "dtype" => "float32", "shape" => [1, -1], "data" => "".b }), "invalid_field", nil, "shape"],
      [pack({ "dtype" => "float32", "shape" => [1, 1] }) + "\x90".b, "malformed", 24, nil],
    ].each do |body, category, offset, field|
      error = assert_raises(Densewire::Error) { M.decode(body) }
      assert_equal [category, offset, field], [error.category, error.offset, error.field], body.unpack1("H*")
    end
  end
end
