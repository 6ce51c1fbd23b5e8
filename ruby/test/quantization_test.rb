# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/fake_embeddings_server"
require "digest"

# Quantized embeddings: the rule's edge cases (bounds, clamping, NaN, infinities, -0.0, a zero step,
# ties of the float32 rounding), the quantization id, the published object, every codec carrying the
# id, and the client's dequantize option against the fake server.
class QuantizationTest < Minitest::Test
  Q = Densewire::Quantization
  INF = Float::INFINITY
  NAN = Float::NAN

  def rows(d, *values)
    Densewire::Tensor.from_values(values, shape: [values.size / d, d])
  end

  def f32_bits(x)
    [x].pack("e").unpack1("L<")
  end

  # lower 0, upper 255: step is exactly 1, so every code below is exact arithmetic
  LOWER = [0.0, -1.0, 2.0].freeze
  UPPER = [255.0, 254.0, 2.0].freeze

  def test_quantize_floors_and_clamps
    t = rows(3, 0, -1, 2, 255, 254, 2, 3.99, 0.5, 1, -7, -300, 1e30, 300, 1e9, -1e9)
    u = Q.quantize(t, LOWER, UPPER, dtype: "uint8")
    assert_equal ["uint8", [5, 3]], [u.dtype, u.shape]
    # x == lower: 0; x == upper: 255; a zero step (lower == upper == 2): 0 at or below lower, 255 above
    assert_equal [0, 0, 0, 255, 255, 0, 3, 1, 0, 0, 0, 255, 255, 255, 0], u.to_a
  end

  def test_quantize_nan_infinities_and_negative_zero
    t = rows(3, NAN, NAN, NAN, INF, INF, INF, -INF, -INF, -INF, -0.0, -0.0, -0.0)
    assert_equal [0, 0, 0, 255, 255, 255, 0, 0, 0, 0, 1, 0], Q.quantize(t, LOWER, UPPER, dtype: "uint8").to_a
  end

  def test_int8_is_uint8_minus_128
    t = rows(3, 0, 100, 2, 255, 254, 3, 127.5, 127, 1)
    u = Q.quantize(t, LOWER, UPPER, dtype: "uint8")
    i = Q.quantize(t, LOWER, UPPER, dtype: "int8")
    assert_equal "int8", i.dtype
    assert_equal u.to_a.map { |x| x - 128 }, i.to_a
    assert_equal [-128, -27, -128, 127, 127, 127, -1, 0, -128], i.to_a
  end

  def test_quantize_errors_name_the_field
    t = rows(3, 0, 0, 0)
    assert_error("invalid_field", "dtype") { Q.quantize(t.convert("float16"), LOWER, UPPER, dtype: "int8") }
    assert_error("invalid_field", "dtype") { Q.quantize(t, LOWER, UPPER, dtype: "binary") }
    assert_error("shape_mismatch", "lower") { Q.quantize(t, [0, 0], [1, 1], dtype: "int8") }
    assert_error("invalid_field", "upper[1]") { Q.quantize(t, [0, 0, 0], [1, -1, 1], dtype: "int8") }
    assert_error("invalid_field", "lower[1]") { Q.quantize(t, [0, NAN, 0], [1, 1, 1], dtype: "int8") }
    assert_error("invalid_field", "upper[2]") { Q.quantize(t, [0, 0, 0], [1, 1, INF], dtype: "int8") }
  end

  def test_dequantize_gives_the_middle_of_each_interval
    codes = Densewire::Tensor.from_values([[0, 255], [3, 128]], dtype: "uint8")
    out = Q.dequantize(codes, [0, -255], [255, 0])
    assert_equal ["float32", [2, 2]], [out.dtype, out.shape]
    assert_equal [0.5, 0.5, 3.5, -126.5], out.to_a
    signed = Densewire::Tensor.from_values([[-128, 127], [-125, 0]], dtype: "int8")
    assert_equal [0.5, 0.5, 3.5, -126.5], Q.dequantize(signed, [0, -255], [255, 0]).to_a
  end

  def test_dequantize_with_a_zero_step_gives_lower_itself
    codes = Densewire::Tensor.from_values([[0, 200, 255]], dtype: "uint8")
    out = Q.dequantize(codes, [-0.0, 7, 1], [-0.0, 7, 1])
    assert_equal [0x8000_0000, f32_bits(7.0), f32_bits(1.0)], out.bits
  end

  def test_dequantize_rounds_ties_to_even
    # lower 1, step 2^-23 (one float32 ulp at 1): 1 + (u + 0.5) * 2^-23 is halfway between two float32
    # values and rounds to the one with an even significand
    ulp = 2.0**-23
    codes = Densewire::Tensor.from_values([[0, 1, 2, 254]], dtype: "uint8")
    out = Q.dequantize(codes, [1.0] * 4, [1 + 255 * ulp] * 4)
    assert_equal [1.0, 1 + 2 * ulp, 1 + 2 * ulp, 1 + 254 * ulp].map { |x| f32_bits(x) }, out.bits
  end

  def test_dequantize_undoes_quantize_within_half_a_step
    rng = Random.new(17)
    200.times do
      d = rng.rand(1..9)
      bounds = Array.new(d) { [rng.rand(-4.0..4.0), rng.rand(-4.0..4.0)].minmax }
      lower = Convert32.round(bounds.map(&:first))
      upper = Convert32.round(bounds.map(&:last))
      x = Convert32.round(Array.new(d) { |j| rng.rand(lower[j]..upper[j]) })
      t = Densewire::Tensor.from_values(x, shape: [1, d])
      %w[int8 uint8].each do |dtype|
        back = Q.dequantize(Q.quantize(t, lower, upper, dtype: dtype), lower, upper).to_a
        d.times do |j|
          step = (upper[j] - lower[j]) / 255.0
          # half a step, plus the float32 rounding of the result (half an ulp of it)
          assert_operator (back[j] - x[j]).abs, :<=, step / 2 + back[j].abs * 2.0**-24 + 2.0**-150, "#{x[j]} -> #{back[j]}"
        end
      end
    end
  end

  # float32 rounding of Ruby Floats
  module Convert32
    def self.round(values)
      values.pack("e*").unpack("e*")
    end
  end

  def test_dequantize_keeps_model_and_usage_of_embeddings
    codes = Densewire::Embeddings.new(Densewire::Tensor.from_values([[0]], dtype: "int8"), model: "m",
                                                                                         usage: Densewire::Usage.new(prompt_tokens: 1, total_tokens: 1),
                                                                                         quantization: "0123456789abcdef")
    out = Q.dequantize(codes, [0], [1])
    assert_kind_of Densewire::Embeddings, out
    assert_equal ["m", 1, nil], [out.model, out.usage.total_tokens, out.quantization]
  end

  def test_dequantize_errors
    assert_error("invalid_field", "dtype") { Q.dequantize(rows(1, 0), [0], [1]) }
    codes = Densewire::Tensor.from_values([[0, 1]], dtype: "uint8")
    assert_error("shape_mismatch", "lower") { Q.dequantize(codes, [0], [1]) }
    assert_error("shape_mismatch", "upper") { Q.dequantize(codes, [0, 0], [1]) }
  end

  def test_id_is_sha256_of_the_ranges_and_d
    lower = [-0.5, -0.0, 1e-45]
    upper = [0.5, 0.0, 3.4028234663852886e+38]
    expected = Digest::SHA256.hexdigest(lower.pack("e*") + upper.pack("e*") + "3")[0, 16]
    assert_equal expected, Q.id(lower, upper)
    assert_equal expected, Q.id(lower.pack("e*"), upper.pack("e*"))
    assert_equal Digest::SHA256.hexdigest("0")[0, 16], Q.id([], [])
    refute_equal Q.id([0.0], [-0.0]), Q.id([0.0], [0.0])
  end

  def published(lower, upper, **patch)
    Q.new(lower: lower, upper: upper, calibration: Q::Calibration.new(name: "fake", texts: 8, sha256: "0" * 64)).to_h
     .merge(patch.transform_keys(&:to_s))
  end

  def test_from_object_reads_the_published_object
    doc = published([-0.25, -1, 0], [0.75, 1, 0])
    q = Q.from_object(doc)
    assert_equal [doc["id"], "minmax-per-dimension", 3], [q.id, q.method_name, q.dimensions]
    assert_equal [-0.25, -1.0, 0.0], q.lower
    assert_equal [0.75, 1.0, 0.0], q.upper
    assert_equal "fake", q.calibration.name
    assert_equal q, Q.from_object(JSON.generate(doc))
    assert_equal doc, q.to_h
  end

  def test_from_object_errors_name_the_field_in_the_order_of_the_spec
    lower = [-0.25, -1, 0]
    upper = [0.75, 1, 0]
    assert_error("malformed", nil) { Q.from_object([]) }
    assert_error("malformed", nil) { Q.from_object("{") }
    assert_error("invalid_field", "id") { Q.from_object(published(lower, upper, id: 7, dimensions: "x")) }
    assert_error("invalid_field", "id") { Q.from_object(published(lower, upper, id: "ABC")) }
    assert_error("invalid_field", "id") { Q.from_object(published(lower, upper, id: "0123456789abcdef")) }
    assert_error("invalid_field", "method") { Q.from_object(published(lower, upper, method: "absmax")) }
    assert_error("invalid_field", "dimensions") { Q.from_object(published(lower, upper, dimensions: -1)) }
    assert_error("invalid_field", "upper") { Q.from_object(published(lower, upper, dimensions: 4, upper: 5)) }
    e = assert_error("length_mismatch", "lower") { Q.from_object(published(lower, upper, dimensions: 4)) }
    assert_equal 12, e.offset
    e = assert_error("invalid_base64", "upper") { Q.from_object(published(lower, upper, upper: "AAAA*AAA")) }
    assert_equal 4, e.offset
    assert_error("invalid_field", "lower") { Q.from_object(published(lower, upper).except("lower")) }
    swapped = published(lower, upper).merge("lower" => published(upper, upper)["lower"], "upper" => published(lower, lower)["lower"])
    swapped["id"] = Q.id(upper, lower)
    assert_error("invalid_field", "upper[0]") { Q.from_object(swapped) }
    assert_error("invalid_field", "data[0].quantization.upper[0]") { Q.from_object(swapped, prefix: "data[0].quantization.") }
  end

  # ---------------------------------------------------------------- codecs
  ID = "0123456789abcdef"

  def codes
    Densewire::Embeddings.new(Densewire::Tensor.from_values([[-128, 0, 127], [5, -5, 1]], dtype: "int8"), model: "m",
                                                                                                        usage: Densewire::Usage.new(prompt_tokens: 2, total_tokens: 2), quantization: ID)
  end

  def test_json_carries_the_id_after_dimensions
    %w[float base64].each do |fmt|
      text = Densewire::JSONEnvelope.encode(codes, encoding_format: fmt)
      assert text.end_with?(%("dimensions":3,"quantization":"#{ID}"})), text
      assert_equal codes, Densewire::JSONEnvelope.decode(text)
    end
    plain = Densewire::Embeddings.new(codes.tensor)
    assert_nil Densewire::JSONEnvelope.decode(Densewire::JSONEnvelope.encode(plain)).quantization
  end

  def test_raw_carries_the_id_in_a_header
    headers, body = Densewire::Raw.encode(codes)
    assert_equal ID, headers["Densewire-Quantization"]
    assert_equal codes, Densewire::Raw.decode(body, headers)
    assert_equal ID, Densewire::Raw.decode(body, headers.merge("Densewire-Quantization" => nil, "densewire-quantization" => " #{ID} ")).quantization
  end

  def test_msgpack_carries_the_id_after_usage
    skip "the msgpack gem is not installed" unless GoldenFiles.msgpack?

    body = Densewire::Msgpack.encode(codes)
    assert body.end_with?("\xacquantization\xb0#{ID}".b), body.inspect
    assert_equal codes, Densewire::Msgpack.decode(body)
  end

  def test_protobuf_carries_the_id_in_field_4
    body = Densewire::Protobuf.encode(codes, message: "EmbeddingsResponse")
    assert body.end_with?("\x22\x10#{ID}".b)
    assert_equal codes, Densewire::Protobuf.decode(body, message: "EmbeddingsResponse")
    bad = Densewire::Protobuf.encode(Densewire::Embeddings.new(codes.tensor, model: "m"), message: "EmbeddingsResponse") + "\x20\x01".b
    e = assert_error("malformed", nil) { Densewire::Protobuf.decode(bad, message: "EmbeddingsResponse") }
    assert_equal bad.bytesize - 2, e.offset
    if GoldenFiles.google_protobuf?
      assert_equal codes, Densewire::Protobuf.from_message(Densewire::Protobuf.to_message(codes, message: "EmbeddingsResponse"))
    end
  end

  def test_arrow_carries_the_id_in_the_schema_metadata
    assert_equal codes, Densewire::Arrow.decode(Densewire::Arrow.encode(codes))
  end

  def test_the_id_is_written_whatever_the_dtype_and_must_be_a_string
    # servers give it for int8/uint8 only; encoders write what they are given (SPEC.md 17.5)
    floats = Densewire::Embeddings.new(rows(1, 1.0), quantization: ID)
    assert_equal ID, Densewire::JSONEnvelope.decode(Densewire::JSONEnvelope.encode(floats)).quantization
    assert_equal ID, Densewire::Raw.decode(*Densewire::Raw.encode(floats).reverse).quantization
    assert_equal ID, Densewire::Protobuf.decode(Densewire::Protobuf.encode(floats, message: "EmbeddingsResponse"), message: "EmbeddingsResponse").quantization
    assert_equal ID, Densewire::Arrow.decode(Densewire::Arrow.encode(floats)).quantization
    # a Tensor message has no field for it (nor for model and usage)
    assert_nil Densewire::Protobuf.decode(Densewire::Protobuf.encode(codes, message: "Tensor")).quantization
    assert_error("invalid_field", "quantization") { Densewire::JSONEnvelope.decode(Densewire::JSONEnvelope.encode(codes).sub(%("#{ID}"), "7")) }
    assert_error("invalid_field", "quantization") { Densewire::JSONEnvelope.encode(codes.tensor, quantization: 7) }
  end

  # ---------------------------------------------------------------- client
  def test_client_dequantizes_with_the_published_ranges_fetched_once
    server = FakeEmbeddingsServer.new
    q = FakeEmbeddingsServer::QUANTIZATION
    %i[raw protobuf arrow json].each do |fmt|
      client = Densewire::Client.new(base_url: server.url, formats: [fmt])
      before = server.quantization_requests.size
      %w[int8 uint8].each do |dtype|
        codes = client.create_embeddings(input: %w[a b], dtype: dtype)
        assert_equal [dtype, q.id], [codes.dtype, codes.quantization], fmt.to_s
        floats = client.create_embeddings(input: %w[a b], dtype: dtype, dequantize: true)
        assert_equal "float32", floats.dtype
        assert_equal q.dequantize(codes).tensor, floats.tensor
        assert_equal 7, floats.usage.total_tokens
        rows = client.embed(%w[a b], dtype: dtype, dequantize: true)
        assert_equal floats.to_a, rows
        # within half a step of the float32 rows, except the 3 that was clamped to its upper bound 2
        [[1.0, -2.5, 0.10000000149011612], [2.0, 0.5, -1.0]].flatten.each_with_index do |x, k|
          j = k % 3
          step = (q.upper[j] - q.lower[j]) / 255
          assert_operator (rows.flatten[k] - x).abs, :<=, step / 2 + 1e-7, "item #{k}"
        end
      end
      assert_equal [q.id], server.quantization_requests[before..], fmt.to_s
      client.close
    end
  ensure
    server&.stop
  end

  def test_client_refuses_dequantize_without_a_quantized_dtype
    server = FakeEmbeddingsServer.new
    client = Densewire::Client.new(base_url: server.url)
    assert_raises(ArgumentError) { client.create_embeddings(input: ["a"], dequantize: true) }
    assert_raises(ArgumentError) { client.embed(["a"], dtype: "binary", dequantize: true) }
    e = assert_raises(Densewire::HTTPError) { client.quantization("0123456789abcdef") }
    assert_equal [404, "not_found"], [e.status, e.code]
    client.close
  ensure
    server&.stop
  end

  private

  def assert_error(category, field)
    e = assert_raises(Densewire::Error) { yield }
    assert_equal category, e.category, e.message
    assert_equal field, e.field, e.message unless field.nil?
    e
  end
end
