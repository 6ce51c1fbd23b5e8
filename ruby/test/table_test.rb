# frozen_string_literal: true

require_relative "test_helper"

class TableTest < Minitest::Test
  def test_parse_columns_header
    fields = Densewire::Table.parse_columns_header("uuid=uuid,name%20with%20space%2F%C3%A9=int32,e=float32[384]")
    assert_equal ["uuid", "name with space/é", "e"], fields.map(&:name)
    assert_equal ["uuid", "int32", "float32[384]"], fields.map(&:type)
    assert_equal [nil, nil, 384], fields.map(&:dimensions)
    assert_equal "uuid=uuid,name%20with%20space%2F%C3%A9=int32,e=float32[384]", Densewire::Table.columns_header(fields)
  end

  def test_malformed_columns_headers
    { "a" => Densewire::InvalidFieldError, "a=int32,b" => Densewire::InvalidFieldError,
      "a%2=int32" => Densewire::InvalidFieldError, "a%zz=int32" => Densewire::InvalidFieldError,
      "%FF=int32" => Densewire::InvalidFieldError, "a=int32,a=int64" => Densewire::InvalidFieldError,
      "=int32" => Densewire::InvalidFieldError, "a=decimal" => Densewire::UnknownDtypeError,
      "a=float32[0]" => Densewire::UnknownDtypeError, "a=float32[03]" => Densewire::UnknownDtypeError,
      "a=Float32" => Densewire::UnknownDtypeError }.each do |value, klass|
      error = assert_raises(klass, value) { Densewire::Table.parse_columns_header(value) }
      assert_equal "Densewire-Columns", error.field, value
    end
  end

  def test_byte_stream_split_round_trips_for_every_width_and_size
    rng = Random.new(42)
    [2, 4, 8, 16].each do |w|
      [0, 1, 2, 7, 8, 9, 16, 17, 33, 1000].each do |m|
        plain = rng.bytes(w * m)
        split = Densewire::Table.split(plain, w)
        assert_equal plain.bytesize, split.bytesize
        assert_equal Densewire::Table.unsplit_bytewise(split, w), Densewire::Table.unsplit(split, w), "w=#{w} m=#{m}"
        assert_equal plain, Densewire::Table.unsplit(split, w), "w=#{w} m=#{m}"
      end
    end
    # byte k of item i is at k * m + i (SPEC.md 15.6)
    assert_equal "\x01\x03\x02\x04".b, Densewire::Table.split("\x01\x02\x03\x04".b, 2)
  end

  def test_packed_and_ruby_values_agree
    c = Densewire::Table::Column.new(name: "v", type: "float32[2]", values: [[1.0, -2.5], [0.1, 3.0]])
    refute c.packed?
    assert_equal "0000803f000020c0cdcccc3d00004040", c.to_packed.unpack1("H*")
    packed = Densewire::Table::Column.new(name: "v", type: "float32[2]", values: c.to_packed, packed: true)
    assert_equal 2, packed.size
    assert_equal [[1.0, -2.5], [0.10000000149011612, 3.0]], packed.to_a
  end

  def test_json_objects_need_types
    error = assert_raises(Densewire::InvalidFieldError) { Densewire::Table.decode("[]", format: :json) }
    assert_equal "Densewire-Columns", error.field
  end

  def test_rows_header_must_match_the_objects
    error = assert_raises(Densewire::ShapeMismatchError) do
      Densewire::Table.decode('[{"a":1}]', format: :json, headers: { "densewire-columns" => "a=int32", "densewire-rows" => "2" })
    end
    assert_equal "Densewire-Rows", error.field
  end

  def test_float32_out_of_range_in_json_is_invalid
    error = assert_raises(Densewire::InvalidFieldError) do
      Densewire::Table.decode('{"name":"t","rows":1,"columns":[{"name":"a","type":"float32","values":[1e39]}]}', format: "json-columns")
    end
    assert_equal "columns[0].values[0]", error.field
  end

  def test_int64_beyond_2_53_is_exact_in_ruby
    t = Densewire::Table.decode('{"name":"t","columns":[{"name":"n","type":"int64"}],"rows":[[9007199254740993]]}', format: :json_rows)
    assert_equal [9_007_199_254_740_993], t["n"].values
  end
end
