# frozen_string_literal: true

require_relative "test_helper"

# The golden vectors of tables (SPEC.md sections 13 and 15): one test per case id of
# testdata/golden/tables.json, every case run. Values are compared by their bits: each decoded
# column, as Ruby values and as packed bytes, must give the golden little-endian bytes. Cases of features
# Ruby does not claim (capabilities.json) are listed after the run, not run.
class TableGoldenTest < Minitest::Test
  CLAIMED = GoldenCapabilities.claimed(%w[tables])
  FORMATS = { "json" => :json, "json-rows" => :json_rows, "json-columns" => :json_columns, "csv" => :csv,
              "msgpack" => :msgpack, "protobuf" => :protobuf, "arrow" => :arrow }.freeze

  module Expected
    module_function

    # The little-endian bytes of a golden column's values (an Array of Strings for strings).
    def bytes(col)
      v = col["values"]
      case col["type"]
      when "bool" then v.map { |b| b ? 1 : 0 }.pack("C*")
      when "int32" then v.map { |s| Integer(s, 10) }.pack("l<*")
      when "int64" then v.map { |s| Integer(s, 10) }.pack("q<*")
      when "float32", "float64" then GoldenFiles.le_bytes(v)
      when "string" then v
      when "uuid" then [v.join.delete("-")].pack("H*")
      else GoldenFiles.le_bytes(v.flatten)
      end
    end

    def table(c)
      columns = c["columns"].map do |col|
        data = bytes(col)
        Densewire::Table::Column.new(name: col["name"], type: col["type"], values: data, packed: col["type"] != "string")
      end
      Densewire::Table.new(name: c["table"], rows: c["rows"], columns: columns)
    end
  end

  def self.case_test(c, &body)
    define_method("test_#{c["id"]}") { instance_exec(c, &body) } if CLAIMED.include?(c["id"])
  end

  def body_of(c)
    c.key?("encoded_hex") || c.key?("input_hex") ? [c["encoded_hex"] || c["input_hex"]].pack("H*") : (c["encoded_text"] || c["input_text"])
  end

  def decode(c, packed:)
    columns = c["columns"]&.map { |col| [col["name"], col["type"]] } if c["id"].start_with?("invalid.")
    Densewire::Table.decode(body_of(c), format: FORMATS.fetch(c["format"]), headers: c["headers"], columns: columns,
                                        packed: packed)
  end

  # Every column of +table+ holds the golden values, by bits; +packed+ says which form it must be in.
  def assert_golden_table(c, table, packed:)
    assert_equal [c["table"], c["rows"]], [table.name, table.rows]
    assert_equal c["columns"].map { |col| [col["name"], col["type"]] }, table.columns.map { |col| [col.name, col.type] }
    c["columns"].each_with_index do |col, k|
      got = table.columns[k]
      want = Expected.bytes(col)
      if col["type"] == "string"
        assert_equal want, got.values, col["name"]
        assert(got.values.all? { |s| s.encoding == Encoding::UTF_8 }, "strings are UTF-8")
        next
      end
      assert_equal packed, got.packed?, col["name"]
      if packed
        assert_equal Encoding::BINARY, got.values.encoding
        assert_equal GoldenFiles.hex(want), GoldenFiles.hex(got.values), col["name"]
        next
      end
      assert_equal c["rows"], got.values.size, col["name"]
      # Ruby values of the right class, and packing them back gives the golden bits.
      case col["type"]
      when "bool" then assert_equal col["values"], got.values
      when "int32", "int64" then assert_equal col["values"].map { |s| Integer(s, 10) }, got.values
      when "uuid" then assert_equal col["values"], got.values
      when "float32", "float64" then assert_floats(col["values"], got.values, col["type"], col["name"])
      else
        assert(got.values.all? { |row| row.size == got.dimensions }, col["name"])
        assert_floats(col["values"].flatten, got.values.flatten, "float32", col["name"])
      end
      return if col["type"].start_with?("float") && col["values"].flatten.any? { |h| nan_bits?(h) }

      assert_equal GoldenFiles.hex(want), GoldenFiles.hex(got.to_packed), col["name"]
    end
  end

  def nan_bits?(hex)
    bits = hex.to_i(16)
    hex.size == 8 ? (bits & 0x7fffffff) > 0x7f800000 : (bits & 0x7fff_ffff_ffff_ffff) > 0x7ff0_0000_0000_0000
  end

  # Ruby Floats by bits. A float32 NaN becomes a Ruby (binary64) Float, which cannot keep a float32
  # signalling NaN's payload bits: those only have to be NaN of the same sign (packed: true keeps
  # every bit, and is checked by bits above).
  def assert_floats(golden_hex, floats, type, name)
    assert_equal golden_hex.size, floats.size, name
    golden_hex.zip(floats).each_with_index do |(hex, f), i|
      assert_kind_of Float, f, "#{name}[#{i}]"
      if nan_bits?(hex)
        assert f.nan?, "#{name}[#{i}] must be NaN"
        assert_equal hex.to_i(16)[hex.size * 4 - 1], [f].pack("G").unpack1("Q>")[63], "#{name}[#{i}] keeps the sign of NaN"
      else
        assert_equal hex, [f].pack(type == "float32" ? "g" : "G").unpack1("H*"), "#{name}[#{i}]"
      end
    end
  end

  GoldenFiles.cases("tables").each do |c|
    if c["id"].start_with?("invalid.")
      case_test(c) do |c|
        error = assert_raises(Densewire::Error) do
          if c["direction"] == "encode"
            raise "unexpected encode case format #{c["format"]}" unless c["format"] == "json"

            Densewire::TableJSON.encode_objects(Expected.table(c))
          else
            decode(c, packed: false)
          end
        end
        assert_golden_error(c, error)
      end
      next
    end

    case_test(c) do |c|
      assert_golden_table(c, decode(c, packed: false), packed: false)
      assert_golden_table(c, decode(c, packed: true), packed: true)
      expected = Expected.table(c)
      assert_equal expected, decode(c, packed: true) # Column#== compares by bits
      case c["format"]
      when "msgpack"
        assert c["byte_exact"]
        assert_equal GoldenFiles.hex(body_of(c)), GoldenFiles.hex(Densewire::TableMsgpack.encode(expected))
      when "protobuf"
        assert c["byte_exact"]
        out = Densewire::TableProtobuf.encode(expected, encoding: c["column_encoding"])
        assert_equal GoldenFiles.hex(body_of(c)), GoldenFiles.hex(out)
      when "json", "json-rows", "json-columns", "csv"
        # Text goldens are not byte-exact: our own encoding must decode back to the same bits, and
        # the headers we would send match the golden ones.
        assert_equal c["headers"]["Densewire-Columns"], expected.columns_header
        text = { "json" => :encode_objects, "json-rows" => :encode_rows, "json-columns" => :encode_columns }[c["format"]]
        ours = text ? Densewire::TableJSON.public_send(text, expected) : Densewire::TableCSV.encode(expected)
        back = Densewire::Table.decode(ours, format: FORMATS[c["format"]], headers: c["headers"])
        assert_equal expected, back, ours
      when "arrow"
        refute c["byte_exact"] # decode-only (SPEC.md section 10)
      end
    end
  end

  def test_every_claimed_case_ran
    assert_operator GoldenFiles.cases("tables").size, :>=, 81, "tables.json lost cases"
    ids = CLAIMED.map { |id| "test_#{id}" }
    assert_empty ids - self.class.public_instance_methods.map(&:to_s)
  end
end
