# frozen_string_literal: true

require_relative "test_helper"

class MediaTest < Minitest::Test
  M = Densewire::Media

  def test_negotiation_follows_rfc9110_and_the_server_order
    {
      nil => :json, "" => :json, "*/*" => :json,
      "application/octet-stream" => :raw,
      "application/x-msgpack" => :msgpack,
      "application/x-protobuf;q=0.5, application/json;q=0.4" => :protobuf,
      "application/*" => :json,
      "application/*, application/json;q=0" => :raw,
      "application/vnd.msgpack;q=0.9, application/octet-stream" => :raw,
      "application/json;q=0.9, */*;q=0.95" => :raw,
      "text/html, application/json;q=0.1" => :json,
      "Application/OCTET-STREAM" => :raw,
    }.each do |accept, format|
      assert_equal format, M.negotiate(accept), accept.inspect
    end
    assert_equal :msgpack, M.negotiate("application/json", format: "msgpack")
  end

  def test_nothing_acceptable
    error = assert_raises(Densewire::NotAcceptableError) { M.negotiate("text/html") }
    assert_equal 406, error.http_status
    assert_includes error.message, "application/octet-stream"
    assert_raises(Densewire::NotAcceptableError) { M.negotiate("application/json;q=0", supported: %i[json raw]) }
    assert_raises(Densewire::NotAcceptableError) { M.negotiate(nil, format: "parquet") }
    assert_equal :arrow, M.negotiate("application/vnd.apache.arrow.stream")
  end

  def test_formats_of_content_types
    assert_equal :msgpack, M.format_of("application/msgpack; charset=binary")
    assert_equal :json, M.format_of("application/json; charset=utf-8")
    assert_nil M.format_of("text/plain")
  end

  def test_response_round_trip_in_every_supported_format
    t = Densewire::Tensor.from_values([[1.0, 2.0]])
    emb = Densewire::Embeddings.new(t, model: "m", usage: Densewire::Usage.new(prompt_tokens: 1, total_tokens: 1))
    M::SUPPORTED.each do |fmt|
      type, headers, body = M.encode_response(emb, fmt)
      assert_equal emb, M.decode_response(body, content_type: type, headers: headers), fmt.to_s
      gz = M.decode_response(Zlib.gzip(body), content_type: type, headers: headers, content_encoding: "gzip")
      assert_equal emb, gz, fmt.to_s
    end
  end

  def test_unsupported_bodies
    assert_raises(Densewire::UnsupportedMediaTypeError) { M.decode_response("", content_type: "text/html") }
    assert_raises(Densewire::UnsupportedMediaTypeError) { M.decode_response("", content_type: M::JSON, content_encoding: "br") }
    assert_raises(Densewire::MalformedError) { M.decode_response("nope", content_type: M::JSON, content_encoding: "gzip") }
  end
end
