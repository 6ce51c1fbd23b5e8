# frozen_string_literal: true

require_relative "test_helper"

# The golden vectors of SPEC.md section 17.7, testdata/golden/quantization.json: one test per case id
# Ruby claims (capabilities.json), checked by its operation; the others are listed after the run.
class QuantizationGoldenTest < Minitest::Test
  FILE = "quantization"
  CLAIMED = GoldenCapabilities.claimed([FILE])
  Q = Densewire::Quantization

  def ranges(c)
    [c["lower"], c["upper"]].map { |items| GoldenFiles.le_bytes(items) } # packed float32, NaN bits kept
  end

  def input(c)
    Densewire::Tensor.new(GoldenFiles.le_bytes(c["input"]), dtype: "float32", shape: c["shape"])
  end

  def codes(c)
    Densewire::Tensor.new([c["codes"].join].pack("H*"), dtype: c["dtype"], shape: c["shape"])
  end

  def f32_hex(tensor)
    tensor.bits.map { |b| format("%08x", b) }
  end

  def byte_hex(tensor)
    tensor.data.unpack("C*").map { |b| format("%02x", b) }
  end

  def assert_envelope(c, result)
    assert_equal [c["dtype"], c["shape"]], [result.dtype, result.shape]
    assert_equal GoldenFiles.hex(GoldenFiles.le_bytes(c["items"])), GoldenFiles.hex(result.tensor.data)
    assert_equal c["model"], result.model
    assert_equal c["usage"], result.usage.to_h
    assert_equal c["quantization"], result.quantization
  end

  def meta(c)
    { model: c["model"], usage: c["usage"], quantization: c["quantization"] }
  end

  def check_envelope(c)
    tensor = GoldenFiles.tensor(c)
    case c["format"]
    when "raw"
      assert_envelope(c, Densewire::Raw.decode([c["encoded_hex"]].pack("H*"), c["headers"]))
      headers, body = Densewire::Raw.encode(tensor, **meta(c))
      assert_equal [c["headers"], c["encoded_hex"]], [headers, GoldenFiles.hex(body)]
    when "msgpack"
      skip "the msgpack gem is not installed" unless GoldenFiles.msgpack?

      assert_envelope(c, Densewire::Msgpack.decode([c["encoded_hex"]].pack("H*")))
      assert_equal c["encoded_hex"], GoldenFiles.hex(Densewire::Msgpack.encode(tensor, **meta(c)))
    when "protobuf"
      assert_envelope(c, Densewire::Protobuf.decode([c["encoded_hex"]].pack("H*"), message: c["message"]))
      assert_equal c["encoded_hex"], GoldenFiles.hex(Densewire::Protobuf.encode(tensor, message: c["message"], **meta(c)))
    when "arrow"
      result = Densewire::Arrow.decode([c["encoded_hex"]].pack("H*"))
      assert_envelope(c, result)
      assert_equal result, Densewire::Arrow.decode(Densewire::Arrow.encode(tensor, **meta(c)))
    when "json"
      result = Densewire::JSONEnvelope.decode(c["encoded_text"])
      assert_envelope(c, result)
      ours = Densewire::JSONEnvelope.encode(tensor, encoding_format: c["encoding_format"], byteorder: c["byteorder"], **meta(c))
      assert_equal c["encoded_text"], ours if c["byte_exact"]
      assert_equal result, Densewire::JSONEnvelope.decode(ours)
    else flunk "unknown format #{c["format"]}"
    end
  end

  def check_invalid(c)
    error = assert_raises(Densewire::Error) do
      case c["operation"]
      when "quantize" then Q.quantize(input(c), *ranges(c), dtype: "int8")
      when "dequantize" then Q.dequantize(codes(c), *ranges(c))
      when "id" then Q.from_object(c["input_text"])
      else
        case c["format"]
        when "json" then Densewire::JSONEnvelope.decode(c["input_text"])
        when "msgpack"
          skip "the msgpack gem is not installed" unless GoldenFiles.msgpack?

          Densewire::Msgpack.decode([c["input_hex"]].pack("H*"))
        when "protobuf" then Densewire::Protobuf.decode([c["input_hex"]].pack("H*"), message: c["message"])
        else flunk "unknown format #{c["format"]}"
        end
      end
    end
    assert_golden_error(c, error)
  end

  GoldenFiles.cases(FILE).each do |c|
    next unless CLAIMED.include?(c["id"])

    define_method("test_#{c["id"]}") do
      next check_invalid(c) if c.key?("error")

      case c["operation"]
      when "quantize"
        assert_equal c["uint8"], byte_hex(Q.quantize(input(c), *ranges(c), dtype: "uint8"))
        assert_equal c["int8"], byte_hex(Q.quantize(input(c), *ranges(c), dtype: "int8"))
      when "dequantize"
        out = Q.dequantize(codes(c), *ranges(c))
        assert_equal [c["shape"], c["output"]], [out.shape, f32_hex(out)]
      when "id"
        assert_equal c["quantization"], Q.id(*ranges(c))
        q = Q.from_object(c["encoded_text"])
        assert_equal [c["quantization"], c["dimensions"]], [q.id, q.dimensions]
        assert_equal ranges(c), [q.lower, q.upper].map { |v| v.pack("e*") }
        assert_equal JSON.parse(c["encoded_text"]), q.to_h
      when "binary"
        packed = Densewire::Tensor.from_values(GoldenFiles.le_bytes(c["input"]).unpack("e*"), dtype: "binary", shape: c["shape"])
        assert_equal c["binary"], byte_hex(packed)
        cohere = Q.cohere_binary(packed)
        assert_equal c["cohere_binary"], cohere.map(&:to_s)
        assert_equal packed.data, Q.from_cohere_binary(cohere)
      when "envelope" then check_envelope(c)
      else flunk "unknown operation #{c["operation"]}"
      end
    end
  end
end
