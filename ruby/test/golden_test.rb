# frozen_string_literal: true

require_relative "test_helper"

# The data-driven golden test of SPEC.md section 13: one test per case id of the four files in
# testdata/golden, every case Ruby claims run (capabilities.json); the others are listed after the run.
class GoldenTest < Minitest::Test
  CLAIMED = GoldenCapabilities.claimed(%w[tensors interop conversions invalid])

  def self.case_test(c, &body)
    define_method("test_#{c["id"]}") { instance_exec(c, &body) } if CLAIMED.include?(c["id"])
  end

  # -------------------------------------------------------------------- checks shared by cases
  def assert_tensor(c, tensor, msg = nil)
    assert_equal [c["dtype"], c["shape"]], [tensor.dtype, tensor.shape], msg
    assert_equal GoldenFiles.hex(GoldenFiles.le_bytes(c["items"])), GoldenFiles.hex(tensor.data), msg
  end

  def assert_envelope(c, result)
    assert_tensor(c, result.tensor)
    return unless c.key?("model")

    assert_equal c["model"], result.model
    assert_equal c["usage"], result.usage.to_h
  end

  def meta(c)
    c.key?("model") ? { model: c["model"], usage: c["usage"] } : {}
  end

  def decode_body(c, body)
    case c["format"]
    when "raw" then Densewire::Raw.decode(body, c["headers"] || {})
    when "msgpack" then Densewire::Msgpack.decode(body)
    when "protobuf" then Densewire::Protobuf.decode(body, message: c["message"] || "Tensor")
    when "arrow" then Densewire::Arrow.decode(body)
    else flunk "no binary decoder for #{c["format"]}"
    end
  end

  # -------------------------------------------------------------------- tensors.json
  GoldenFiles.cases("tensors").each do |c|
    case_test(c) do |c|
      case c["format"]
      when "base64"
        t = Densewire::Base64.decode(c["encoded_text"], dtype: c["dtype"], shape: c["shape"], byteorder: c["byteorder"])
        assert_tensor(c, t)
        assert_equal c["encoded_text"], Densewire::Base64.encode(GoldenFiles.tensor(c), byteorder: c["byteorder"])
      when "raw"
        body = [c["encoded_hex"]].pack("H*")
        assert_envelope(c, decode_body(c, body))
        headers, out = Densewire::Raw.encode(GoldenFiles.tensor(c), **meta(c))
        assert_equal c["headers"], headers
        assert_equal c["encoded_hex"], GoldenFiles.hex(out)
      when "msgpack"
        assert_envelope(c, decode_body(c, [c["encoded_hex"]].pack("H*")))
        assert_equal c["encoded_hex"], GoldenFiles.hex(Densewire::Msgpack.encode(GoldenFiles.tensor(c), **meta(c)))
      when "protobuf"
        assert_envelope(c, decode_body(c, [c["encoded_hex"]].pack("H*")))
        out = Densewire::Protobuf.encode(GoldenFiles.tensor(c), message: c["message"], **meta(c))
        assert_equal c["encoded_hex"], GoldenFiles.hex(out)
      when "json"
        result = Densewire::JSONEnvelope.decode(c["encoded_text"])
        assert_tensor(c, result.tensor)
        assert_equal c["model"] || "", result.model
        # Our own encoding (same encoding format and byte order) decodes back to the same tensor.
        ours = Densewire::JSONEnvelope.encode(result, encoding_format: c["encoding_format"], byteorder: c["byteorder"])
        assert_tensor(c, Densewire::JSONEnvelope.decode(ours).tensor, ours)
      when "arrow"
        # Arrow streams are decode-only goldens (writers differ in layout): decode pyarrow's bytes,
        # then our own encoding must decode back to the same tensor, model and usage.
        result = Densewire::Arrow.decode([c["encoded_hex"]].pack("H*"))
        assert_envelope(c, result)
        assert_equal result, Densewire::Arrow.decode(Densewire::Arrow.encode(GoldenFiles.tensor(c), **meta(c)))
      else
        flunk "unknown format #{c["format"]}"
      end
    end
  end

  # -------------------------------------------------------------------- interop.json
  GoldenFiles.cases("interop").each do |c|
    case_test(c) do |c|
      case c["format"]
      when "base64"
        t = Densewire::Base64.decode(c["encoded_text"], dtype: c["dtype"], shape: c["shape"], byteorder: c["byteorder"])
        assert_tensor(c, t)
        if c["byte_exact"]
          assert_equal c["encoded_text"], Densewire::Base64.encode(GoldenFiles.tensor(c), byteorder: c["byteorder"])
        end
      when "json"
        assert_tensor(c, Densewire::JSONEnvelope.decode(c["encoded_text"]).tensor)
      else
        flunk "unknown interop format #{c["format"]}"
      end
    end
  end

  # -------------------------------------------------------------------- conversions.json
  GoldenFiles.cases("conversions").each do |c|
    case_test(c) do |c|
      shape = c["shape"] || [1, c["input"].size]
      out = Densewire::Tensor.from_bits(GoldenFiles.bits(c["input"]), dtype: c["from"], shape: shape).convert(c["to"])
      width = c["output"].first.size
      assert_equal c["output"], out.bits.map { |b| b.to_s(16).rjust(width, "0") }
    end
  end

  # -------------------------------------------------------------------- invalid.json
  GoldenFiles.cases("invalid").each do |c|
    case_test(c) do |c|
      error = assert_raises(Densewire::Error) do
        if c["direction"] == "encode"
          t = Densewire::Tensor.from_bits(GoldenFiles.bits(c["items"]), dtype: c["dtype"], shape: c["shape"])
          Densewire::JSONEnvelope.encode(t, encoding_format: c["encoding_format"])
        else
          case c["format"]
          when "base64"
            Densewire::Base64.decode(c["input_text"], dtype: c["dtype"], shape: c["shape"], byteorder: c["byteorder"])
          when "json" then Densewire::JSONEnvelope.decode(c["input_text"] || [c["input_hex"]].pack("H*"))
          else decode_body(c, [c["input_hex"]].pack("H*"))
          end
        end
      end
      assert_golden_error(c, error)
    end
  end
end
