# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/tiny_http_server"

# Sparse vectors (Client#embed_sparse, TEI's POST /embed_sparse): from the real server with the hash
# model (DENSEWIRE_SERVER_URL, which scripts/test.sh starts) every format gives TEI's JSON vectors bit
# for bit; TEI's JSON read from a tiny server is checked fault by fault.
class SparseLiveTest < Minitest::Test
  URL = ENV["DENSEWIRE_SERVER_URL"]
  TEXTS = ["a cat sits on the mat", "hi", "the quick brown fox jumps over the lazy dog"].freeze

  def client(format, &blk)
    Densewire::Client.open(base_url: URL, api_key: ENV["DENSEWIRE_API_KEY"], formats: [format], max_retries: 8, retry_max_delay: 2.0, &blk)
  end

  def setup
    return unless URL.nil?

    flunk "DENSEWIRE_SERVER_URL is not set, and CI=true: scripts/test.sh must start densewire serve" if ENV["CI"] == "true"
    skip "DENSEWIRE_SERVER_URL is not set (scripts/test.sh starts densewire serve --model hash:384 there)"
  end

  def test_every_format_gives_tei_json_vectors
    tei = client(:json) { |c| c.embed_sparse(TEXTS) }
    assert_equal 3, tei.shape[0]
    assert_equal "float32", tei.dtype
    (0...3).each { |i| refute_empty tei.vector(i)[0], "text #{i} has non-zero weights" }
    refute_equal tei.vector(0)[0], tei.vector(2)[0]
    vocab = nil
    %i[raw msgpack protobuf arrow].each do |format|
      t = client(format) { |c| c.embed_sparse(TEXTS) }
      assert_equal ["float32", tei.offsets, tei.indices], [t.dtype, t.offsets, t.indices], format
      assert_equal tei.data, t.data, "#{format}: the values differ from TEI's JSON"
      assert_operator t.shape[1], :>=, tei.shape[1], format
      vocab = t.shape[1]
    end
    assert_equal vocab, client(:json) { |c| c.embed_sparse(TEXTS, vocab_size: vocab) }.shape[1]
  end

  # The hash:D rule (python/src/densewire/_backends/hash.py): blake2b of each word, index x % 30522, weight
  # ((x >> 40) + 1) / 2^24, the largest per index.
  def test_the_hash_models_documented_vector_and_max_active_dims
    t = client(:raw) { |c| c.embed_sparse("hello world hello") }
    assert_equal [[1, 30_522], [26_240, 26_746], [0.827504, 0.3063963].pack("e*")], [t.shape, t.indices, t.data]
    top = client(:msgpack) { |c| c.embed_sparse(["hello world hello", TEXTS[2]], max_active_dims: 1) }
    assert_equal [[0, 1, 2], 26_240], [top.offsets, top.indices[0]]
  end

  def test_a_text_over_the_limit_is_the_servers_413
    long = "word " * 9000
    e = assert_raises(Densewire::HTTPError) { client(:raw) { |c| c.embed_sparse([long], truncate: false) } }
    assert_equal 413, e.status
    assert_match(/tokens/, e.message)
    assert_equal 2, client(:raw) { |c| c.embed_sparse([long, "short"], truncate: true) }.shape[0]
  end
end

class SparseTEIJSONTest < Minitest::Test
  def setup
    @body = nil
    @server = TinyHTTPServer.new do |req|
      req.path == "/embed_sparse" ? [200, { "Content-Type" => "application/json" }, @body] : [404, {}, "no route #{req.path}"]
    end
    @client = Densewire::Client.new(base_url: @server.url, formats: [:raw])
  end

  def teardown
    @server.stop
  end

  def test_tei_json_is_read_into_one_indices_and_one_values_array
    @body = '[[{"index":1,"value":0.5},{"index":7,"value":2}],[]]'
    t = @client.embed_sparse(%w[a b])
    assert_equal [[2, 8], [0, 2, 2], [1, 7], [0.5, 2.0]], [t.shape, t.offsets, t.indices, t.data.unpack("e*")]
    assert_equal 30_522, @client.embed_sparse(%w[a b], vocab_size: 30_522).shape[1]
    assert_equal({ "inputs" => %w[a b], "truncate" => false, "truncation_direction" => "Left", "prompt_name" => "query" },
                 JSON.parse(@client.embed_sparse(%w[a b], truncate: false, truncation_direction: "Left", prompt_name: "query").then { @server.requests.last.body }))
  end

  def test_faults_are_named
    {
      '[[{"index":-1,"value":1}]]' => [Densewire::InvalidFieldError, "[0][0].index"],
      '[[{"index":1.5,"value":1}]]' => [Densewire::InvalidFieldError, "[0][0].index"],
      '[[{"index":1,"value":"x"}]]' => [Densewire::InvalidFieldError, "[0][0].value"],
      '[[{"index":3,"value":1},{"index":2,"value":1}]]' => [Densewire::InvalidFieldError, "indices"],
      '{"index":1}' => [Densewire::InvalidFieldError, "$"],
      '[[{"index":1,"value":1}],[]]' => [Densewire::ShapeMismatchError, "data"],
    }.each do |body, (klass, field)|
      @body = body
      e = assert_raises(klass, body) { @client.embed_sparse(["a"]) }
      assert_equal field, e.field, body
    end
    assert_raises(ArgumentError) { @client.embed_sparse([]) }
  end
end
