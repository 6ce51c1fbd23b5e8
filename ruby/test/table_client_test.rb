# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/fake_embeddings_server"
require "minitest/mock"

# Client#list_tables and Client#table against the in-process server, which answers with the golden
# table bodies and the headers of SPEC.md section 15.9.
class TableClientTest < Minitest::Test
  POINT_IDS = %w[7c9e6679-7425-40de-944b-e07fc1f90ae7].freeze

  def setup
    @server = FakeEmbeddingsServer.new(api_key: "sk-test")
    @client = Densewire::Client.new(base_url: @server.url, api_key: "sk-test")
    @golden = GoldenFiles.cases("tables").to_h { |c| [c["id"], c] }
  end

  def teardown
    @client.close
    @server.stop
  end

  def golden_points
    @golden.fetch("table.protobuf.plain.points")
  end

  def test_list_tables
    tables = @client.list_tables
    points = tables.find { |t| t.name == "points" }
    assert_equal 3, points.rows
    assert_equal "uuid=uuid,status=int32,longitude=float64,latitude=float64", points.columns.map(&:to_s).join(",")
    assert_includes points.formats, "protobuf"
    assert_equal "golden-1", points.version
    assert_equal "/v1/tables", @server.http.requests.last.path
    assert_equal "Bearer sk-test", @server.http.requests.last.headers["authorization"]
  end

  def test_default_negotiates_msgpack_and_gzip
    table = @client.table("points")
    req = @server.http.requests.last
    assert_equal "/v1/tables/points", req.path
    assert_equal "application/vnd.msgpack, application/protobuf;q=0.9, application/vnd.densewire.columns+json;q=0.8",
                 req.headers["accept"]
    assert_includes req.headers["accept-encoding"], "gzip" # set by Net::HTTP, which also inflates
    assert_equal "application/vnd.msgpack", table.content_type
    assert_equal %("points-msgpack-gzip"), table.etag
    assert_equal "points", table.name
    assert_equal 3, table.rows
    assert_equal POINT_IDS.first, table["uuid"].values.first
    assert_equal golden_points["columns"][2]["values"], table["longitude"].values.map { |f| [f].pack("G").unpack1("H*") }
    assert_equal golden_points["columns"][1]["values"].map(&:to_i), table["status"].values
  end

  def test_without_the_msgpack_gem_protobuf_is_asked_for_first
    @client.stub(:msgpack?, false) do
      assert_equal "application/protobuf, application/vnd.densewire.columns+json;q=0.9", @client.table_accept
      table = @client.table("points")
      assert_equal "application/protobuf", table.content_type
      assert_equal golden_points["columns"][1]["values"].map(&:to_i), table["status"].values
    end
  end

  def test_every_format_gives_the_same_table
    expected = @client.table("all_types", format: :protobuf, packed: true)
    %i[msgpack arrow json json_rows json_columns csv].each do |fmt|
      got = @client.table("all_types", format: fmt, packed: true)
      assert_equal expected, got, fmt.to_s
      assert_equal Densewire::Table::MEDIA_TYPES[fmt], @server.http.requests.last.headers["accept"]
      assert_equal "every type", got.name, fmt.to_s
    end
  end

  def test_packed_columns_are_little_endian_bytes
    table = @client.table("points", packed: true)
    lon = table["longitude"]
    assert lon.packed?
    assert_equal Encoding::BINARY, lon.values.encoding
    assert_equal 24, lon.values.bytesize
    assert_equal GoldenFiles.hex(GoldenFiles.le_bytes(golden_points["columns"][2]["values"])), GoldenFiles.hex(lon.values)
    assert_equal 48, table["uuid"].values.bytesize
    assert_equal "7c9e6679742540de944be07fc1f90ae7", table["uuid"].values[0, 16].unpack1("H*")
    assert_equal lon.values.unpack("E*"), lon.to_a
  end

  def test_etag_and_not_modified
    first = @client.table("points", format: :msgpack)
    assert_nil @client.table("points", format: :msgpack, if_none_match: first.etag)
    assert_equal first.etag, @server.http.requests.last.headers["if-none-match"]
    again = @client.table("points", format: :msgpack, if_none_match: %("stale"))
    assert_equal first, again
    assert_equal "Fri, 21 Nov 2025 12:00:00 GMT", again.last_modified
  end

  def test_unknown_table_is_not_found
    error = assert_raises(Densewire::HTTPError) { @client.table("nope") }
    assert_equal [404, "not_found", "name"], [error.status, error.code, error.param]
    assert_equal "not_found", error.category
  end

  def test_format_the_table_does_not_have_is_not_acceptable
    error = assert_raises(Densewire::HTTPError) { @client.table("non_finite", format: :json) }
    assert_equal [406, "not_acceptable"], [error.status, error.code]
  end

  def test_wrong_api_key
    client = Densewire::Client.new(base_url: @server.url, api_key: "wrong")
    error = assert_raises(Densewire::HTTPError) { client.list_tables }
    assert_equal [401, "unauthorized"], [error.status, error.code]
    client.close
  end

  def test_names_are_percent_encoded_in_the_path
    error = assert_raises(Densewire::HTTPError) { @client.table("a b/c") }
    assert_equal "/v1/tables/a%20b%2Fc", @server.http.requests.last.path
    assert_equal 404, error.status
  end

  def test_base_url_with_v1_suffix
    client = Densewire::Client.new(base_url: "#{@server.url}/v1/", api_key: "sk-test")
    assert_equal 1, client.table("single", format: :csv).rows
    assert_equal "/v1/tables/single", @server.http.requests.last.path
    client.close
  end

  def test_headers_that_disagree_with_the_body_fail
    server = TinyHTTPServer.new do |_req|
      body = [golden_points["encoded_hex"]].pack("H*")
      [200, golden_points["headers"].merge("Content-Type" => "application/protobuf", "Densewire-Rows" => "4"), body]
    end
    client = Densewire::Client.new(base_url: server.url)
    error = assert_raises(Densewire::ShapeMismatchError) { client.table("points") }
    assert_equal "Densewire-Rows", error.field
  ensure
    client&.close
    server&.stop
  end

  def test_a_corrupt_body_raises_the_codec_error
    server = TinyHTTPServer.new do |_req|
      [200, { "Content-Type" => "application/protobuf" }, [golden_points["encoded_hex"]].pack("H*")[0, 30]]
    end
    client = Densewire::Client.new(base_url: server.url)
    error = assert_raises(Densewire::TruncatedError) { client.table("points") }
    assert_equal 30, error.offset
  ensure
    client&.close
    server&.stop
  end

  def test_decode_by_content_type_with_response_headers
    c = @golden.fetch("table.csv.points")
    table = Densewire::Table.decode(c["encoded_text"], content_type: "text/csv; charset=utf-8; header=present",
                                                       headers: c["headers"].transform_keys(&:downcase))
    assert_equal ["points", 3], [table.name, table.rows]
    assert_equal c["columns"][1]["values"].map(&:to_i), table["status"].values
  end
end
