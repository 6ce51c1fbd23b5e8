# frozen_string_literal: true

require_relative "test_helper"

# Against a real `densewire serve` (scripts/test.sh starts one and sets DENSEWIRE_SERVER_URL). Its
# demo table "points" has 67,627 rows: uuid uuid, status int32, longitude float64, latitude float64.
# Without DENSEWIRE_SERVER_URL these tests are reported as skipped, with the reason.
class LiveServerTest < Minitest::Test
  URL = ENV["DENSEWIRE_SERVER_URL"]
  POINTS_COLUMNS = "uuid=uuid,status=int32,longitude=float64,latitude=float64"

  def setup
    skip "DENSEWIRE_SERVER_URL is not set (scripts/test.sh sets it to a running densewire serve)" unless URL

    @client = Densewire::Client.new(base_url: URL, api_key: ENV["DENSEWIRE_API_KEY"])
  end

  def teardown
    @client&.close
  end

  def test_list_tables_has_the_demo_points
    points = @client.list_tables.find { |t| t.name == "points" }
    refute_nil points, "the server lists no table named points"
    assert_equal 67_627, points.rows
    assert_equal POINTS_COLUMNS, points.columns.map(&:to_s).join(",")
    assert_includes points.formats, "protobuf"
    refute_empty points.version.to_s
  end

  def test_points_by_default_negotiation
    table = @client.table("points")
    assert_equal "application/vnd.msgpack", table.content_type.split(";").first
    assert_equal ["points", 67_627, POINTS_COLUMNS], [table.name, table.rows, table.columns_header]
    assert(table["uuid"].values.all? { |u| u.match?(Densewire::Table::UUID) })
    assert(table["status"].values.all?(Integer))
    lon = table["longitude"].values
    lat = table["latitude"].values
    assert_equal 67_627, lon.size
    assert(lon.all? { |x| x.is_a?(Float) && x.between?(-180.0, 180.0) })
    assert(lat.all? { |x| x.is_a?(Float) && x.between?(-90.0, 90.0) })
    refute_nil table.etag
  end

  def test_every_format_gives_the_same_bits
    reference = @client.table("points", format: :protobuf, packed: true)
    assert_equal 67_627 * 8, reference["longitude"].values.bytesize
    %i[msgpack arrow json_columns json_rows json csv].each do |fmt|
      got = @client.table("points", format: fmt, packed: true)
      assert_equal reference, got, "#{fmt} differs from protobuf"
    end
  end

  def test_not_modified
    first = @client.table("points", format: :msgpack, packed: true)
    refute_nil first.etag
    assert_nil @client.table("points", format: :msgpack, if_none_match: first.etag)
  end

  # SPEC.md section 17: the server's int8/uint8 codes are exactly what Quantization.quantize gives for
  # its own float32 answer with the published ranges; dequantize: true gives their dequantize.
  def test_quantized_embeddings_match_the_published_ranges
    texts = ["a cat sits on the mat", "a dog sleeps"]
    [nil, 128].each do |dimensions|
      floats = @client.create_embeddings(input: texts, dimensions: dimensions)
      %w[int8 uint8].each do |dtype|
        codes = @client.create_embeddings(input: texts, dtype: dtype, dimensions: dimensions)
        assert_equal dtype, codes.dtype
        assert_match(/\A[0-9a-f]{16}\z/, codes.quantization.to_s, "the response names its ranges")
        q = @client.quantization(codes.quantization)
        assert_equal codes.shape[1], q.dimensions
        assert_equal codes.tensor, q.quantize(floats.tensor, dtype: dtype)
        back = @client.create_embeddings(input: texts, dtype: dtype, dimensions: dimensions, dequantize: true)
        assert_equal q.dequantize(codes.tensor), back.tensor
      end
    end
  end

  def test_unknown_table
    error = assert_raises(Densewire::HTTPError) { @client.table("no_such_table_here") }
    assert_equal [404, "not_found"], [error.status, error.code]
  end
end
