# frozen_string_literal: true

require_relative "test_helper"

class JSONEnvelopeTest < Minitest::Test
  J = Densewire::JSONEnvelope

  def tensor
    Densewire::Tensor.from_values([[1.0, -2.5, 0.1], [3.0, 0.5, -1.0]])
  end

  def test_writes_keys_in_the_spec_order
    text = J.encode(tensor, encoding_format: "base64", model: "m", usage: { prompt_tokens: 3, total_tokens: 3 })
    assert_equal '{"object":"list","data":[{"object":"embedding","index":0,"embedding":"AACAPwAAIMDNzMw9"},' \
                 '{"object":"embedding","index":1,"embedding":"AABAQAAAAD8AAIC/"}],"model":"m",' \
                 '"usage":{"prompt_tokens":3,"total_tokens":3},"dtype":"float32","byteorder":"little","dimensions":3}', text
  end

  def test_float_rows_use_shortest_decimals
    doc = JSON.parse(J.encode(tensor))
    assert_equal [1.0, -2.5, 0.1], doc["data"][0]["embedding"]
    assert_includes J.encode(tensor), "[1.0,-2.5,0.1]"
    assert_equal "little", doc["byteorder"]
    assert_equal tensor, J.decode(J.encode(tensor)).tensor
  end

  def test_integer_and_binary_rows
    t = Densewire::Tensor.from_values([[-1, 2]], dtype: "int8")
    assert_includes J.encode(t), '"embedding":[-1,2]'
    b = Densewire::Tensor.from_bits([0xb3, 0xf0], dtype: "binary", shape: [1, 12])
    assert_includes J.encode(b), '"embedding":[179,240]'
    assert_equal b, J.decode(J.encode(b)).tensor
  end

  def test_big_endian_base64_rows
    text = J.encode(tensor, encoding_format: "base64", byteorder: "big")
    assert_includes text, '"P4AAAMAgAAA9zMzN"'
    assert_equal tensor, J.decode(text).tensor
  end

  def test_byteorder_applies_to_base64_rows_only
    text = '{"data":[{"index":0,"embedding":"P4AAAMAgAAA9zMzN"},{"index":1,"embedding":[1.0,-2.5,0.1]}],"byteorder":"big"}'
    rows = J.decode(text).to_a
    assert_equal rows[0], rows[1]
    assert_equal [1.0, -2.5, 0.10000000149011612], rows[1]
  end

  def test_openai_defaults_when_densewire_fields_are_absent
    text = '{"data":[{"index":0,"embedding":"AACAPwAAIMDNzMw9"}],"model":"text-embedding-3-small"}'
    result = J.decode(text)
    assert_equal ["float32", [1, 3]], [result.dtype, result.shape]
    assert_equal "text-embedding-3-small", result.model
    assert_nil result.usage
    bin = J.decode('{"data":[{"index":0,"embedding":[179,240]}],"dtype":"binary"}')
    assert_equal [1, 16], bin.shape
  end

  def test_integral_floats_are_int8_integers
    assert_equal [[3, -128]], J.decode('{"data":[{"index":0,"embedding":[3.0,-128.0]}],"dtype":"int8"}').tensor.rows
    error = assert_raises(Densewire::InvalidFieldError) { J.decode('{"data":[{"index":0,"embedding":[3.5]}],"dtype":"int8"}') }
    assert_equal "data[0].embedding[0]", error.field
  end

  def test_usage_counts_are_non_negative_integers
    text = ->(count) { %({"data":[{"index":0,"embedding":"AACAPw=="}],"usage":{"prompt_tokens":#{count},"total_tokens":2}}) }
    assert_equal [3, 2], J.decode(text.call(3)).usage.to_h.values
    assert_equal [9_007_199_254_740_991, 2], J.decode(text.call("9007199254740991")).usage.to_h.values
    error = assert_raises(Densewire::InvalidFieldError) { J.decode('{"data":[],"usage":[1,1]}') }
    assert_equal "usage", error.field
    ["1e3080", "1.5", "-1", '"3"', "true", "null", "9007199254740992"].each do |count|
      error = assert_raises(Densewire::InvalidFieldError, count) { J.decode(text.call(count)) }
      assert_equal "usage.prompt_tokens", error.field
    end
  end

  def test_decoding_errors
    {
      '[1,2]' => ["malformed", nil],
      '{"data":{}}' => ["invalid_field", "data"],
      '{"data":[7]}' => ["invalid_field", "data[0]"],
      '{"data":[{"index":"0","embedding":[1.0]}]}' => ["invalid_field", "data[0].index"],
      '{"data":[{"index":0,"embedding":[1.0,"x"]}]}' => ["invalid_field", "data[0].embedding[1]"],
      '{"data":[{"index":0,"embedding":[1,300]}],"dtype":"uint8"}' => ["invalid_field", "data[0].embedding[1]"],
      '{"data":[{"index":0,"embedding":[1.0]}],"dtype":5}' => ["invalid_field", "dtype"],
      '{"data":[{"index":0,"embedding":[1.0]}],"dimensions":-1}' => ["invalid_field", "dimensions"],
      '{"data":[{"index":0,"embedding":[Infinity]}]}' => ["malformed", nil],
    }.each do |text, (category, field)|
      error = assert_raises(Densewire::Error, text) { J.decode(text) }
      assert_equal [category, field], [error.category, error.field], text
    end
  end

  def test_encoding_errors
    nan = Densewire::Tensor.from_bits([0x3f800000, 0x7fc00000], dtype: "float32", shape: [2, 1])
    error = assert_raises(Densewire::NonFiniteError) { J.encode(nan) }
    assert_equal ["data[1].embedding[0]", 422], [error.field, error.http_status]
    assert_includes J.encode(nan, encoding_format: "base64"), '"AADAfw=="'
    assert_raises(Densewire::InvalidFieldError) { J.encode(nan, encoding_format: "hex") }
  end

  def test_error_envelope
    error = Densewire::InvalidBase64Error.new("invalid Base64 character '*' at offset 4", offset: 4, field: "data[1].embedding")
    assert_equal({ "error" => { "message" => "data[1].embedding: invalid Base64 character '*' at offset 4",
                                "type" => "invalid_request_error", "param" => "data[1].embedding",
                                "code" => "invalid_base64", "offset" => 4 } }, error.to_h)
  end
end

# The fast path (Base64 rows cut out before JSON.parse) gives exactly what parsing the whole text
# gives, results and errors alike, on inputs made to trip it up.
class JSONEnvelopeFastPathTest < Minitest::Test
  J = Densewire::JSONEnvelope

  def slow(text)
    J.decode_doc(J.parse(text), nil)
  rescue Densewire::Error => e
    [e.class, e.message, e.offset, e.field]
  end

  def fast(text)
    J.decode(text)
  rescue Densewire::Error => e
    [e.class, e.message, e.offset, e.field]
  end

  def big_rows
    t = Densewire::Tensor.new(Random.new(3).bytes(64 * 96 * 4), dtype: "float32", shape: [64, 96])
    [t, J.encode(t, encoding_format: "base64", model: "m")]
  end

  def test_the_fast_path_is_taken_for_a_plain_response
    _, text = big_rows
    doc, rows = J.parse_without_rows(text)
    assert_equal 64, rows.size
    assert_equal "\u00000", doc["data"][0]["embedding"]
  end

  def test_same_results_and_errors_as_the_full_parse
    t, text = big_rows
    first = text[/"embedding":"([^"]*)"/, 1]
    variants = {
      plain: text,
      pretty: JSON.pretty_generate(JSON.parse(text)),
      escaped_slashes: text.gsub("/", "\\/"),
      escaped_key: text.sub('"embedding"', '"embeddin\\u0067"'),
      nul_elsewhere: text.sub('"model":"m"', '"model":"\\u0000"'),
      fake_mark: text.sub('"model":"m"', '"model":"m","x":{"embedding":"\\u00000"}'),
      unused_key_plain: text.sub('"model":"m"', '"model":"m","embedding":"QUJD"'),
      unused_key_control_char: text.sub('"model":"m"', %("model":"m","embedding":"AB\tC")),
      control_char_in_row: text.sub(first, "#{first[0, 8]}\n#{first[8..]}"),
      bad_char_in_row: text.sub(first, "#{first[0, 8]}*#{first[9..]}"),
      quote_escape_in_row: text.sub(first, "#{first[0, 8]}\\\"#{first[8..]}"),
      duplicate_key: text.sub(%("embedding":"#{first}"), %("embedding":"AAAA","embedding":"#{first}")),
      short_row: text.sub(first, first[0, 16]),
      truncated: text[0, text.size / 2],
      nul_between_rows: text.sub('"index":1,', '"index":1,"x":"\\u0000",'),
      nul_in_fake_mark_between_rows: text.sub('"index":1,', '"index":1,"x":{"embedding":"\\u00001"},'),
      spaced_colon: text.gsub('"embedding":"', %("embedding" :\t\r\n ")),
      key_as_value_only: text.gsub('"embedding":"', '"embedding","vector":"'),
      number_row_among_base64: text.sub(%("#{first}"), "[#{Array.new(96) { |j| j * 0.5 }.join(",")}]"),
      key_at_the_end: "#{text[0...-1]},\"embedding\"",
      colon_at_the_end: "#{text[0...-1]},\"embedding\" : ",
      unterminated_row: "#{text[0...-1]},\"embedding\":\"AAAA",
      rows_out_of_order: text.sub('"index":0', '"index":99').sub('"index":1,', '"index":0,').sub('"index":99', '"index":1'),
    }
    variants.each do |name, variant|
      expected = slow(variant)
      assert_equal expected, fast(variant), name.to_s
    end
    assert_equal t, J.decode(variants[:pretty]).tensor
    assert_equal 64, J.parse_without_rows(variants[:spaced_colon])[1].size, "whitespace around the colon is still cut out"
    assert_nil J.parse_without_rows(variants[:nul_between_rows]), "a \\u0000 in the text left to JSON.parse turns the fast path off"
    assert_equal t, J.decode(variants[:escaped_slashes]).tensor
  end
end
