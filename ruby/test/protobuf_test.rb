# frozen_string_literal: true

require_relative "test_helper"

class ProtobufTest < Minitest::Test
  P = Densewire::Protobuf

  def hex(text)
    [text.delete(" ")].pack("H*")
  end

  def test_unpacked_shape_and_unknown_fields_are_accepted
    # dtype, shape as two unpacked varints, an unknown fixed64, unknown fixed32, unknown bytes, data
    body = hex("0801 1001 1002 21 0102030405060708 2d 01020304 3202 abcd 1a08 0000803f 00000040")
    assert_equal [[1.0, 2.0]], P.decode(body).to_a
  end

  def test_response_round_trip
    t = Densewire::Tensor.from_values([[1.0, 2.0]])
    body = P.encode(t, message: "EmbeddingsResponse", model: "m", usage: { prompt_tokens: 2, total_tokens: 0 })
    result = P.decode(body, message: "EmbeddingsResponse")
    assert_equal [t, "m", 2, 0], [result.tensor, result.model, result.usage.prompt_tokens, result.usage.total_tokens]
    assert_equal "0801120201021a080000803f00000040", P.encode(t).unpack1("H*")
  end

  def test_errors_inside_a_response_have_absolute_offsets_and_nested_fields
    inner = hex("0801 1201 01")
    [
      [hex("12") + [inner.bytesize].pack("C") + inner, "invalid_field", nil, "embeddings.shape"],
      [hex("0a01 41 1206 0801 1a0a 0000"), "malformed", 7, nil], # data length past the submessage
      [hex("0a01 41"), "invalid_field", nil, "embeddings"],
      [hex("0801"), "invalid_field", nil, "embeddings"], # field 1 model with a varint
      [hex("12 05 0801 1202"), "truncated", 6, nil],
    ].each_with_index do |(body, category, offset, field), i|
      error = assert_raises(Densewire::Error) { P.decode(body, message: "EmbeddingsResponse") }
      expected = i == 3 ? ["malformed", 0, nil] : [category, offset, field]
      assert_equal expected, [error.category, error.offset, error.field], body.unpack1("H*")
    end
  end

  def test_wire_errors
    [
      [hex("00"), "malformed", 0],     # field number 0
      [hex("0b"), "malformed", 0],     # dtype (a known field) as a group start
      [hex("0801 5e"), "malformed", 2], # wire type 6
      [hex("0801 5f"), "malformed", 2], # wire type 7
      [hex("08"), "truncated", 1],
      [hex("0801 2d 0102"), "truncated", 5],
      [hex("0801 1203 0101"), "truncated", 6],
      [hex("0801 1202 01ff"), "malformed", 2], # packed varint runs off its field: at the field's tag
    ].each do |body, category, offset|
      error = assert_raises(Densewire::Error) { P.decode(body) }
      assert_equal [category, offset], [error.category, error.offset], body.unpack1("H*")
    end
  end

  # The official serializer (google-protobuf, Debian ruby-google-protobuf) writes exactly our bytes
  # for every golden protobuf case, and reads them back to the same message.
  def test_google_protobuf_agrees_on_every_golden_case
    skip_reason = "google-protobuf is not installed (apt-get install ruby-google-protobuf)"
    flunk skip_reason unless GoldenFiles.google_protobuf?
    v1 = P.messages
    cases = GoldenFiles.cases("tensors").select { |c| c["format"] == "protobuf" }
    refute_empty cases
    cases.each do |c|
      body = [c["encoded_hex"]].pack("H*")
      klass = v1.const_get(c["message"])
      msg = klass.decode(body)
      assert_equal c["encoded_hex"], klass.encode(msg).unpack1("H*"), c["id"]
      assert_equal P.decode(body, message: c["message"]), P.from_message(msg), c["id"]
      ours = P.encode(GoldenFiles.tensor(c), message: c["message"],
                      **(c["model"] ? { model: c["model"], usage: c["usage"] } : {}))
      assert_equal msg, klass.decode(ours), c["id"]
    end
    t = Densewire::Tensor.from_values([[1.0, 2.0]], dtype: "float16")
    assert_equal :DTYPE_FLOAT16, P.to_message(t).dtype
  end

  # SPEC.md section 9: unknown groups (wire types 3 and 4) are skipped up to their end tag, as the
  # protobuf runtimes do.
  def test_unknown_groups_are_skipped_as_the_protobuf_runtime_does
    t = Densewire::Tensor.from_values([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    plain = P.encode(t)
    group = hex("5b 0807 63 1001 64 5c")
    assert_equal t, P.decode(group + plain).tensor
    flunk "google-protobuf is not installed (apt-get install ruby-google-protobuf)" unless GoldenFiles.google_protobuf?
    msg = P.messages::Tensor.decode(group + plain) # the official parser skips the group too
    assert_equal [:DTYPE_FLOAT32, [2, 3], t.data], [msg.dtype, msg.shape.to_a, msg.data]
    assert_equal t, P.decode(hex("5b" * 64 + "5c" * 64) + plain).tensor # 64 levels are fine
    errors = [
      [assert_raises(Densewire::Error) { P.decode(hex("5b 0807 64") + plain) }, "malformed", 3],
      [assert_raises(Densewire::Error) { P.decode(hex("5b 0807")) }, "truncated", 3],
      [assert_raises(Densewire::Error) { P.decode(hex("5b" * 100 + "5c" * 100)) }, "malformed", 64],
      [assert_raises(Densewire::Error) { P.decode(hex("5c") + plain) }, "malformed", 0],
      [assert_raises(Densewire::Error) { P.decode(plain + hex("1b 1c")) }, "malformed", plain.bytesize], # data as a group
    ]
    errors.each do |error, category, offset|
      assert_equal [category, offset], [error.category, error.offset], error.message
    end
    assert_match(/nested too deeply/, errors[2][0].message)
    assert_match(/wrong wire type/, errors[4][0].message)

    # in a response, its embedded Tensor and Usage
    body = P.encode(t, message: "EmbeddingsResponse", model: "m", usage: { prompt_tokens: 2, total_tokens: 3 })
    back = P.decode(group + body, message: "EmbeddingsResponse")
    assert_equal [t, "m", 2, 3], [back.tensor, back.model, back.usage.prompt_tokens, back.usage.total_tokens]
    inner = group + plain
    usage = group + hex("0805")
    body = hex("12") + [inner.bytesize].pack("C") + inner + hex("1a") + [usage.bytesize].pack("C") + usage
    back = P.decode(body, message: "EmbeddingsResponse")
    assert_equal [t, 5, 0], [back.tensor, back.usage.prompt_tokens, back.usage.total_tokens]
  end

  def test_table_decoder_skips_unknown_groups_too
    table = Densewire::Table.new(name: "t", rows: 2, columns: [
      Densewire::Table::Column.new(name: "id", type: "int64", values: [1, 2]),
      Densewire::Table::Column.new(name: "s", type: "string", values: %w[a bc]),
    ])
    plain = Densewire::TableProtobuf.encode(table)
    group = hex("5b 0807 63 1001 64 5c")
    assert_equal table, Densewire::TableProtobuf.decode(group + plain)
    column = group + Densewire::TableProtobuf.column_bytes(table.columns[0], true) + group
    with_column_group = hex("1a") + [column.bytesize].pack("C") + column
    one = Densewire::Table.new(name: "", rows: 2, columns: [table.columns[0]])
    assert_equal one, Densewire::TableProtobuf.decode(hex("1002") + with_column_group)
    [
      [hex("5b 0807 64") + plain, "malformed", 3],
      [hex("5b 0807"), "truncated", 3],
      [hex("5b" * 100 + "5c" * 100), "malformed", 64],
      [hex("5c") + plain, "malformed", 0],
      [plain + hex("0b 0c"), "malformed", plain.bytesize], # name (a known field) as a group
      [plain + hex("5e"), "malformed", plain.bytesize],    # wire type 6
    ].each do |body, category, offset|
      error = assert_raises(Densewire::Error) { Densewire::TableProtobuf.decode(body) }
      assert_equal [category, offset], [error.category, error.offset], error.message
    end
  end
end
