# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/fake_embeddings_server"

class ClientTest < Minitest::Test
  ROWS = [[1.0, -2.5, 0.10000000149011612], [3.0, 0.5, -1.0]].freeze

  def setup
    @server = FakeEmbeddingsServer.new(api_key: "sk-test", gzip: true)
    @client = Densewire::Client.new(base_url: @server.url, api_key: "sk-test", model: "sentence-transformers/all-MiniLM-L6-v2")
  end

  def teardown
    @client.close
    @server.stop
  end

  def test_default_accept_prefers_raw_then_msgpack_then_json
    assert_equal "application/octet-stream, application/vnd.msgpack;q=0.9, application/json;q=0.8", @client.accept
    assert_equal ROWS, @client.embed(%w[hello world])
    req = @server.http.requests.last
    assert_equal "application/octet-stream, application/vnd.msgpack;q=0.9, application/json;q=0.8", req.headers["accept"]
    assert_equal "Bearer sk-test", req.headers["authorization"]
    assert_equal "identity", req.headers["accept-encoding"]
    assert_equal({ "input" => %w[hello world], "encoding_format" => "base64",
                   "model" => "sentence-transformers/all-MiniLM-L6-v2" }, JSON.parse(req.body))
  end

  def test_every_negotiated_format_gives_the_same_result
    %i[raw msgpack protobuf arrow json].each do |fmt|
      client = Densewire::Client.new(base_url: @server.url, api_key: "sk-test", formats: [fmt])
      result = client.create_embeddings(input: %w[a b])
      assert_equal ROWS, result.to_a, fmt.to_s
      assert_equal "sentence-transformers/all-MiniLM-L6-v2", result.model, fmt.to_s
      assert_equal 7, result.usage.total_tokens, fmt.to_s
      assert_equal [2, 3], result.shape
      client.close
    end
  end

  def test_packed_rows_are_little_endian_bytes
    packed = @client.embed(%w[a b], packed: true)
    assert_equal 2, packed.size
    assert_equal [1.0, -2.5, 0.10000000149011612], packed[0].unpack("e*")
    assert_equal Encoding::BINARY, packed[0].encoding
    assert_equal "000040400000003f000080bf", packed[1].unpack1("H*")
  end

  def test_binary_dtype_is_asked_for_and_decoded
    [%i[raw], %i[json], %i[msgpack]].each do |formats|
      client = Densewire::Client.new(base_url: @server.url, api_key: "sk-test", formats: formats)
      result = client.create_embeddings(input: ["x"], dtype: "binary")
      assert_equal "binary", JSON.parse(@server.http.requests.last.body)["dtype"]
      assert_equal [[0xb3, 0xf0]], result.to_a
      assert_equal [[1, 0, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1]], result.tensor.bit_rows
      assert_equal 300, result.usage.prompt_tokens
      client.close
    end
  end

  def test_connection_is_kept_alive
    3.times { @client.embed(%w[a b]) }
    assert_equal 1, @server.http.connections
  end

  def test_threads_share_the_client
    threads = Array.new(4) { Thread.new { 3.times.map { @client.embed(%w[a b]) } } }
    threads.each { |t| t.value.each { |rows| assert_equal ROWS, rows } }
    assert_equal 1, @server.http.connections
  end

  def test_a_connection_closed_by_the_server_is_reopened
    @server.http.drop_connection_after_next_response!
    @client.embed(%w[a b])
    sleep 0.05
    assert_equal ROWS, @client.embed(%w[a b])
    assert_equal 2, @server.http.connections
  end

  def test_gzip_when_asked
    client = Densewire::Client.new(base_url: "#{@server.url}/v1", api_key: "sk-test", formats: [:json], compress: true)
    assert_equal ROWS, client.embed(%w[a b])
    assert_equal "/v1/embeddings", @server.http.requests.last.path
    assert_match(/gzip/, @server.http.requests.last.headers["accept-encoding"])
    client.close
  end

  def test_server_errors_raise_http_error_with_status_code_param_and_message
    error = assert_raises(Densewire::HTTPError) { @client.embed(%w[a b], dtype: "float16") }
    assert_equal 422, error.status
    assert_equal "invalid_field", error.code
    assert_equal "invalid_field", error.category
    assert_equal "dtype", error.param
    assert_equal "dtype", error.field
    assert_equal "this server has float32, binary, int8 and uint8 only", error.server_message
    assert_match(/HTTP 422 invalid_field: this server has float32, binary, int8 and uint8 only/, error.message)
    assert_kind_of Densewire::Error, error

    error = assert_raises(Densewire::HTTPError) { @client.embed(["unavailable"]) }
    assert_equal [503, "unavailable", "server_error"], [error.status, error.code, error.type]

    unauthorized = Densewire::Client.new(base_url: @server.url, api_key: "wrong")
    error = assert_raises(Densewire::HTTPError) { unauthorized.embed(["a"]) }
    assert_equal [401, "unauthorized"], [error.status, error.code]
    unauthorized.close
  end

  def test_a_non_json_error_body_still_gives_status_and_code
    server = TinyHTTPServer.new { [404, { "Content-Type" => "text/plain" }, "nothing here"] }
    client = Densewire::Client.new(base_url: server.url)
    error = assert_raises(Densewire::HTTPError) { client.embed(["a"]) }
    assert_equal [404, "not_found", "nothing here"], [error.status, error.code, error.server_message]
  ensure
    client&.close
    server&.stop
  end

  def test_a_bad_body_from_the_server_raises_the_decode_error
    server = TinyHTTPServer.new do
      [200, { "Content-Type" => "application/octet-stream", "Densewire-Dtype" => "float32", "Densewire-Shape" => "2,3" }, "\0" * 20]
    end
    client = Densewire::Client.new(base_url: server.url)
    error = assert_raises(Densewire::LengthMismatchError) { client.embed(%w[a b]) }
    assert_equal 20, error.offset
  ensure
    client&.close
    server&.stop
  end

  def test_rejects_unknown_formats_and_dtypes_before_sending
    assert_raises(ArgumentError) { Densewire::Client.new(base_url: @server.url, formats: [:parquet]) }
    assert_raises(Densewire::UnknownDtypeError) { @client.embed(["a"], dtype: "fp16") }
    assert_empty @server.http.requests
  end
end
