# frozen_string_literal: true

require_relative "test_helper"

# Ragged and sparse tensors (SPEC.md 20): the golden cases of ragged.json and sparse.json Ruby
# claims (capabilities.json), in every format of Densewire::Kinds; the others are listed after the run.
class RaggedTest < Minitest::Test
  K = Densewire::Kinds
  CLAIMED = GoldenCapabilities.claimed(%w[ragged sparse])
  CASES = %w[ragged sparse].flat_map { |f| GoldenFiles.cases(f) }.select { |c| CLAIMED.include?(c["id"]) }

  def self.decode(c, input)
    kind = c["kind"]
    case c["format"]
    when "json" then K.decode_json(input, kind: kind)
    when "raw" then K.decode_raw(input, c["headers"], kind: kind)
    when "msgpack" then K.decode_msgpack(input, kind: kind)
    when "protobuf" then K.decode_protobuf(input, kind: kind, message: c["message"])
    when "arrow" then K.decode_arrow(input, kind: kind)
    end
  end

  def assert_parts(c, t, what)
    assert_equal [c["kind"], c["dtype"], c["shape"], c["offsets"]], [t.kind, t.dtype, t.shape, t.offsets], what
    assert_equal GoldenFiles.hex(GoldenFiles.le_bytes(c["items"])), GoldenFiles.hex(t.data), what
    assert_equal c["indices"], t.indices, what if c["kind"] == "sparse"
    assert_equal c["model"], t.model, what if c.key?("model")
    assert_equal c["usage"], t.usage.to_h, what if c.key?("usage")
  end

  def encode(c, t)
    meta = c.key?("model") ? { model: c["model"], usage: c["usage"] } : {}
    case c["format"]
    when "json" then K.encode_json(t, encoding_format: c["encoding_format"], byteorder: c["byteorder"], **meta)
    when "raw" then K.encode_raw(t, **meta)
    when "msgpack" then K.encode_msgpack(t, **meta)
    when "protobuf" then K.encode_protobuf(t, message: c["message"], **meta)
    when "arrow" then K.encode_arrow(t, **meta)
    end
  end

  CASES.each do |c|
    define_method("test_#{c["id"]}") do
      if c["id"].start_with?("invalid.")
        input = c["input_text"] || [c["input_hex"]].pack("H*")
        assert_golden_error(c, assert_raises(Densewire::Error) { self.class.decode(c, input) })
        next
      end
      input = c["format"] == "json" ? c["encoded_text"] : [c["encoded_hex"]].pack("H*")
      t = self.class.decode(c, input)
      assert_parts(c, t, "decoded")
      ours = encode(c, t)
      if c["format"] == "raw"
        headers, body = ours
        assert_equal [c["headers"], c["encoded_hex"]], [headers, GoldenFiles.hex(body)] if c["byte_exact"]
        assert_parts(c, K.decode_raw(body, headers, kind: c["kind"]), "ours")
      else
        assert_equal c["encoded_hex"], GoldenFiles.hex(ours) if c["byte_exact"]
        assert_parts(c, self.class.decode(c, ours), "ours")
      end
    end
  end

  def test_matrices_and_vectors_are_byteslices_of_the_one_buffer
    t = Densewire::RaggedTensor.new([1.0, 2.0, 3.0, 4.0, 5.0, 6.0].pack("e*"), dtype: "float32", d: 2, offsets: [0, 2, 3])
    assert_equal [[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0]]], [t.matrix(0).rows, t.matrix(1).rows]
    s = Densewire::SparseTensor.new([0.5, 0.25].pack("e*"), dtype: "float32", vocabulary: 10, offsets: [0, 1, 2], indices: [3, 3])
    assert_equal [[3], [0.5].pack("e*")], s.vector(0)
    error = assert_raises(Densewire::InvalidFieldError) do
      Densewire::SparseTensor.new([0.5, 0.25].pack("e*"), dtype: "float32", vocabulary: 10, offsets: [0, 2], indices: [3, 3])
    end
    assert_equal ["indices", 4], [error.field, error.offset]
  end
end
