# frozen_string_literal: true

require_relative "test_helper"
require "timeout"
require "zlib"

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
    rng = Random.new(SEED ^ Zlib.crc32(name))  # String#hash differs from process to process
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
    return bits(value.tensor) + [value.quantization] if value.is_a?(Densewire::Embeddings)
    return [value.dtype, value.shape, value.data.b] if value.is_a?(Densewire::Tensor)

    [value.rows, value.columns.map { |c| [c.name, c.type.to_s, c.type.to_s == "string" ? c.to_a : c.to_packed.b] }]
  end

  # the tensor envelope cases, and the int8/uint8 responses with their quantization id (SPEC.md 17.5)
  TENSORS = (GoldenFiles.cases("tensors") + GoldenFiles.cases("quantization").select { |c| c["operation"] == "envelope" })
            .group_by { |c| c["format"] }

  def self.tensor_target(format, decode, again)
    define_method("test_fuzz_#{format}") do
      cases = TENSORS.fetch(format)
      fuzz(format, cases.map { |c| self.class.body(c) }, again: ->(r, i) { again.call(r, cases[i]) }) do |i, input|
        decode.call(input, cases[i])
      end
    end
  end

  tensor_target "json", ->(b, _) { Densewire::JSONEnvelope.decode(b) },
                ->(e, _) { Densewire::JSONEnvelope.decode(Densewire::JSONEnvelope.encode(e, encoding_format: "base64")) }
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

  # KServe v2 response bodies (SPEC.md 19, Open Inference Protocol), with their case's header length
  KSERVE = GoldenFiles.cases("kserve").select { |c| c["format"] == "kserve" }

  def test_fuzz_kserve
    fuzz("kserve", KSERVE.map { |c| [c["encoded_hex"] || c["input_hex"]].pack("H*") }) do |i, input|
      Densewire::KServe.decode(input, KSERVE[i]["headers"]).outputs.values.filter_map(&:tensor).first
    end
  end

  # ragged and sparse bodies of every format (SPEC.md 20), with their case's headers and message
  KINDS = %w[ragged sparse].flat_map { |f| GoldenFiles.cases(f) }

  def test_fuzz_ragged_sparse
    bodies = KINDS.map { |c| c["encoded_text"] || c["input_text"] || [c["encoded_hex"] || c["input_hex"]].pack("H*") }
    fuzz("ragged_sparse", bodies) do |i, input|
      c = KINDS[i]
      k = Densewire::Kinds
      case c["format"]
      when "json" then k.decode_json(input, kind: c["kind"])
      when "raw" then k.decode_raw(input, c["headers"], kind: c["kind"])
      when "msgpack" then k.decode_msgpack(input, kind: c["kind"])
      when "protobuf" then k.decode_protobuf(input, kind: c["kind"], message: c["message"])
      else k.decode_arrow(input, kind: c["kind"])
      end.then { |t| Densewire::Tensor.new(t.data, dtype: "uint8", shape: [1, t.data.bytesize]) }
    end
  end

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

  # What comparing the decoders on fuzzed bodies found here (the other languages refused these).
  ARROW_DTYPE_METADATA_NOT_UTF8 = [ # arrow.*, mutated: the schema's densewire.dtype value starts with 0x80
    "ffffffffa80100001000000000000a000e000600050008000a000000000104001000000000000a000c000000040008000a00" \
    "0000a0000000040000000300000068000000380000000400000024ffffff1000000004000000010000003300000014000000" \
    "64656e7365776972652e64696d656e73696f6e730000000054ffffff140000000400000007000000806c6f61743332000f00" \
    "000064656e7365776972652e64747970650080ffffff100000000400000001000000310000001100000064656e7365776972" \
    "652e76657273696f6e00000001000000180000000000120018000800000007000c0000001000140012000000000000101800" \
    "000068000000080000001c000000010000007000000009000000656d62656464696e67000000010000000c00000008000c00" \
    "0400080008000000140000000400000007000000666c6f61743332000f00000064656e7365776972652e6474797065000000" \
    "0600080004000600000003000000100014000800000007000c00000010001000000000000003100000001c00000004000000" \
    "00000000040000006974656d0000060008000600060000000000010000000000ffffffffa800000014000000000000000c00" \
    "16000600050008000c000c0000000003040018000000180000000000000000000a0018000c00040008000a0000004c000000" \
    "1000000002000000000000000000000003000000000000000000000000000000000000000000000000000000000000000000" \
    "0000000000000000000018000000000000000000000002000000020000000000000000000000000000000600000000000000" \
    "00000000000000000000803f000020c0cdcccc3d000040400000003f000080bfffffffff00000000"
  ].pack("H*")
  ARROW_NAME_NOT_UTF8 = [ # table.arrow.*, mutated: column 2's name starts with 0x80
    "fffffffff00200001000000000000a000e000600050008000a000000000104001000000000000a000c000000040008000a00" \
    "00006c0000000400000002000000340000000400000094fdffff140000000400000006000000706f696e747300000f000000" \
    "64656e7365776972652e7461626c6500c0fdffff100000000400000001000000310000001100000064656e7365776972652e" \
    "76657273696f6e000000040000006c010000e40000007000000004000000b6feffff00000003140000005400000008000000" \
    "1800000000000000080000006c6174697475646500000000010000000400000034feffff140000000400000007000000666c" \
    "6f61743634000e00000064656e7365776972652e74797065000096ffffff000002001effffff00000003140000005c000000" \
    "08000000180000000000000009000000806f6e67697475646500000001000000040000009cfeffff14000000040000000700" \
    "0000666c6f61743634000e00000064656e7365776972652e747970650000000006000800060006000000000002008effffff" \
    "000000021400000058000000080000001400000000000000060000007374617475730000010000000400000008ffffff1400" \
    "00000400000005000000696e7433320000000e00000064656e7365776972652e74797065000008000e000800070008000000" \
    "00000001200000000000120018000800000007000c00000010001400120000000000000f14000000d4000000080000001400" \
    "0000000000000400000075756964000000000300000080000000400000000400000094ffffff18000000040000000a000000" \
    "6172726f772e757569640000140000004152524f573a657874656e73696f6e3a6e616d6500000000ccffffff100000000400" \
    "00000000000000000000180000004152524f573a657874656e73696f6e3a6d657461646174610000000008000c0004000800" \
    "0800000014000000040000000400000075756964000000000e00000064656e7365776972652e747970650000000006000800" \
    "04000600000010000000ffffffff1801000014000000000000000c0016000600050008000c000c0000000003040018000000" \
    "700000000000000000000a0018000c00040008000a0000009c00000010000000030000000000000000000000080000000000" \
    "0000000000000000000000000000000000000000000030000000000000003000000000000000000000000000000030000000" \
    "000000000c000000000000004000000000000000000000000000000040000000000000001800000000000000580000000000" \
    "0000000000000000000058000000000000001800000000000000000000000400000003000000000000000000000000000000" \
    "0300000000000000000000000000000003000000000000000000000000000000030000000000000000000000000000007c9e" \
    "6679742540de944be07fc1f90ae70f8fad5bd9cb469fa16570867728950ee4eaaaf2d14211e1b3e4080027620cdd01000000" \
    "0000000001000000000000001c3b8f2d9a7e52c0105839b4c8f60c40b6f3fdd455776140b6d4f1a9b45f4440022b8716d95e" \
    "1a40894160e5d0d64140ffffffff00000000"
  ].pack("H*")

  def test_finding_json_not_utf8_is_malformed
    error = assert_raises(Densewire::MalformedError) { Densewire::JSONEnvelope.decode("{\"\x80bject\":\"list\",\"data\":[]}".b) }
    assert_equal 2, error.offset
  end

  def test_finding_arrow_metadata_and_names_not_utf8_are_malformed
    assert_raises(Densewire::MalformedError) { Densewire::Arrow.decode(ARROW_DTYPE_METADATA_NOT_UTF8) }
    assert_raises(Densewire::MalformedError) { Densewire::Table.decode(ARROW_DTYPE_METADATA_NOT_UTF8, format: :arrow) }
    error = assert_raises(Densewire::MalformedError) { Densewire::Arrow.decode(ARROW_NAME_NOT_UTF8) }
    assert_equal "columns[2]", error.field
  end
end
