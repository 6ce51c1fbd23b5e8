# frozen_string_literal: true

require_relative "test_helper"
require "timeout"

# Property tests of every decoder, seeded from the golden corpus (a seeded Random drives them, so a
# failure names its seed and input): golden bodies mutated (cut short, bits flipped, interesting
# bytes set, bytes and JSON/CSV tokens inserted, runs duplicated, two bodies spliced) either decode
# to a result no larger than the input can describe, or raise a Densewire::Error; never another
# exception, never a hang (10 s per input). What decodes is encoded again and must decode to the
# same bits. FUZZ_RUNS inputs per target (2000 by default), FUZZ_SEED (default 20261125).
class FuzzTest < Minitest::Test
  RUNS = Integer(ENV.fetch("FUZZ_RUNS", 2000))
  SEED = Integer(ENV.fetch("FUZZ_SEED", 20_261_125))
  INTERESTING = [0x00, 0x01, 0x7f, 0x80, 0xff, 0xfe, 0xc0, 0xc1, 0xd9, 0xdc, 0xdd, 0xde, 0xdf, 0xcf, 0xd3].freeze
  TOKENS = ['"', ",", "[", "]", "{", "}", ":", "-", "0", "1e308", "-0", "1e-400", "null", "true", "NaN", "\\u0000",
            "\r\n", "\n", "\uFEFF", "\\", "9999999999999999999999", "[[[[", "=", "%"].map(&:b).freeze

  def self.body(c)
    hex = c["encoded_hex"] || c["input_hex"]
    hex ? [hex].pack("H*") : (c["encoded_text"] || c["input_text"] || "").b
  end

  def mutate(rng, body, corpus)
    b = body.b
    rng.rand(5).times do
      n = b.bytesize
      at = rng.rand(n + 1)
      case rng.rand(7)
      when 0 then b = b.byteslice(0, at)
      when 1 then b.setbyte(at % n, b.getbyte(at % n) ^ (1 << rng.rand(8))) if n.positive?
      when 2 then b.setbyte(at % n, rng.rand(2).zero? ? INTERESTING.sample(random: rng) : rng.rand(256)) if n.positive?
      when 3 then b = b.byteslice(0, at) + rng.bytes(1 + rng.rand(8)) + b.byteslice(at..)
      when 4 then b = b.byteslice(0, at) + TOKENS.sample(random: rng) + b.byteslice(at..)
      when 5
        run = b.byteslice(at, 1 + rng.rand(64)) || "".b
        to = rng.rand(n + 1)
        b = b.byteslice(0, to) + run + b.byteslice(to..)
      else
        other = corpus.sample(random: rng)
        b = b.byteslice(0, at) + other.byteslice(rng.rand(other.bytesize + 1)..)
      end
    end
    b
  end

  # Bytes a decoded value holds: a tensor's data, a table's columns (strings at 16 + their bytes).
  def result_bytes(value)
    value = value.tensor if value.is_a?(Densewire::Embeddings)
    return value.data.bytesize if value.is_a?(Densewire::Tensor)
    return value.columns.sum { |c| c.packed? ? c.values.bytesize : c.values.sum { |v| v.is_a?(String) ? 16 + v.bytesize : 8 } } if value.is_a?(Densewire::Table)

    value.is_a?(Array) ? value.size * 16 : 0
  end

  # Runs +runs+ inputs mutated from +corpus+ (or given by +input+): the block decodes (index, bytes)
  # and may return a decoded value; +again+ encodes and decodes it again.
  def fuzz(name, corpus, again: nil)
    rng = Random.new(SEED ^ name.hash.abs % 65_536)
    RUNS.times do |run|
      i = rng.rand(corpus.size)
      input = mutate(rng, corpus[i], corpus)
      self.assertions += 1
      begin
        result = Timeout.timeout(10) { yield i, input }
      rescue Densewire::Error
        next
      rescue StandardError, Timeout::Error => e
        flunk "#{name} run #{run}: #{e.class}: #{e.message[0, 300]} on input #{input.unpack1("H*")}"
      end
      next if result.nil?

      assert_operator result_bytes(result), :<=, 64 * input.bytesize + 65_536, "#{name}: #{input.unpack1("H*")}"
      next unless again

      begin
        back = again.call(result, i)
      rescue StandardError => e
        flunk "#{name}: the decoded value does not encode and decode again: #{e.class}: #{e.message[0, 300]}, input #{input.unpack1("H*")}"
      end
      assert_equal bits(result), bits(back), "#{name}: re-encoded value differs, input #{input.unpack1("H*")}"
    end
  end

  def bits(value)
    value = value.tensor if value.is_a?(Densewire::Embeddings)
    return [value.dtype, value.shape, value.data.b] if value.is_a?(Densewire::Tensor)

    [value.rows, value.columns.map { |c| [c.name, c.type.to_s, c.type.to_s == "string" ? c.to_a : c.to_packed.b] }]
  end

  TENSORS = GoldenFiles.cases("tensors").group_by { |c| c["format"] }

  def self.tensor_target(format, decode, again)
    define_method("test_fuzz_#{format}") do
      cases = TENSORS.fetch(format)
      fuzz(format, cases.map { |c| self.class.body(c) }, again: ->(r, i) { again.call(r, cases[i]) }) do |i, input|
        decode.call(input, cases[i])
      end
    end
  end

  tensor_target "json", ->(b, _) { Densewire::JSONEnvelope.decode(b) },
                ->(e, _) { Densewire::JSONEnvelope.decode(Densewire::JSONEnvelope.encode(e.tensor, encoding_format: "base64")) }
  tensor_target "base64", ->(b, c) { Densewire::Base64.decode(b, dtype: c["dtype"], shape: c["shape"], byteorder: c["byteorder"]) },
                ->(t, c) { Densewire::Base64.decode(Densewire::Base64.encode(t, byteorder: c["byteorder"]), dtype: c["dtype"], shape: c["shape"], byteorder: c["byteorder"]) }
  tensor_target "raw", ->(b, c) { Densewire::Raw.decode(b, c["headers"]) },
                ->(e, _) { Densewire::Raw.decode(*Densewire::Raw.encode(e).reverse) }
  tensor_target "msgpack", ->(b, _) { Densewire::Msgpack.decode(b) },
                ->(e, _) { Densewire::Msgpack.decode(Densewire::Msgpack.encode(e)) }
  tensor_target "protobuf", ->(b, c) { Densewire::Protobuf.decode(b, message: c["message"]) },
                ->(e, c) { Densewire::Protobuf.decode(Densewire::Protobuf.encode(e, message: c["message"]), message: c["message"]) }
  tensor_target "arrow", ->(b, _) { Densewire::Arrow.decode(b) },
                ->(e, _) { Densewire::Arrow.decode(Densewire::Arrow.encode(e)) }

  # Densewire-Dtype, -Shape, -Byteorder, -Version of the raw cases, mutated; the body is the case's.
  def test_fuzz_raw_headers
    cases = TENSORS.fetch("raw")
    slots = cases.each_with_index.flat_map { |c, i| c["headers"].keys.map { |h| [i, h] } }
    fuzz("raw headers", slots.map { |i, h| cases[i]["headers"][h].b }) do |k, value|
      i, h = slots[k]
      Densewire::Raw.decode(self.class.body(cases[i]), cases[i]["headers"].merge(h => value.force_encoding(Encoding::BINARY)))
    end
  end

  TABLES = GoldenFiles.cases("tables").group_by { |c| c["format"] }
  TABLE_ENCODERS = {
    "json" => ->(t) { Densewire::TableJSON.encode_objects(t) }, "json-rows" => ->(t) { Densewire::TableJSON.encode_rows(t) },
    "json-columns" => ->(t) { Densewire::TableJSON.encode_columns(t) }, "csv" => ->(t) { Densewire::TableCSV.encode(t) },
    "msgpack" => ->(t) { Densewire::TableMsgpack.encode(t) }, "protobuf" => ->(t) { Densewire::TableProtobuf.encode(t) },
    "arrow" => nil # the gem has no Arrow table encoder
  }.freeze

  TABLE_ENCODERS.each do |format, encode|
    define_method("test_fuzz_table_#{format.tr("-", "_")}") do
      cases = TABLES.fetch(format)
      again = encode && lambda do |t, _|
        Densewire::Table.decode(encode.call(t), format: format, columns: t.columns_header, name: t.name, packed: true)
      end
      fuzz("table #{format}", cases.map { |c| self.class.body(c) }, again: again) do |i, input|
        Densewire::Table.decode(input, format: format, headers: cases[i]["headers"], packed: i.odd?)
      end
    end
  end

  # Densewire-Columns, -Rows and -Table of the CSV and JSON objects cases, mutated; the body the case's.
  def test_fuzz_table_headers
    cases = (TABLES["csv"] + TABLES["json"]).select { |c| c["headers"] }
    names = %w[Densewire-Columns Densewire-Rows Densewire-Table]
    slots = cases.each_index.flat_map { |i| names.map { |h| [i, h] } }
    fuzz("table headers", slots.map { |i, h| cases[i]["headers"][h].b }) do |k, value|
      i, h = slots[k]
      c = cases[i]
      Densewire::Table.decode(self.class.body(c), format: c["format"], headers: c["headers"].merge(h => value))
    end
  end

  def test_fuzz_parse_columns_header
    values = GoldenFiles.cases("tables").filter_map { |c| c.dig("headers", "Densewire-Columns")&.b }.uniq
    fuzz("Densewire-Columns", values) do |_, value|
      fields = Densewire::Table.parse_columns_header(value)
      assert_operator fields.size, :<=, value.bytesize
      assert_equal fields.map(&:to_s), Densewire::Table.parse_columns_header(Densewire::Table.columns_header(fields)).map(&:to_s), value.unpack1("H*")
      nil
    end
  end
end
