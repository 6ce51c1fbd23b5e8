# frozen_string_literal: true

module Densewire
  # The Arrow IPC stream of a table, SPEC.md section 15.7 (application/vnd.apache.arrow.stream), read
  # with the gem's own FlatBuffers reader (Densewire::Arrow::FlatBuffer): no Arrow library needed.
  # Columns: Bool, Int32, Int64, Float32, Float64, Utf8 / LargeUtf8, FixedSizeBinary(16) (uuid),
  # FixedSizeList<Float32, d>; the type comes from the field metadata densewire.type and must match
  # the Arrow type; nulls are invalid_field on the column. Decode only (Arrow goldens are decode-only).
  module TableArrow
    TYPE_INT = 2
    TYPE_FLOAT = 3
    TYPE_UTF8 = 5
    TYPE_BOOL = 6
    TYPE_FIXED_SIZE_BINARY = 15
    TYPE_FIXED_SIZE_LIST = 16
    TYPE_LARGE_UTF8 = 20

    module_function

    # Decodes a stream into a Table (+packed+: fixed-width values as little-endian bytes).
    def decode(body, packed: false)
      body = body.to_s.b
      schema = nil
      rows = 0
      batches = 0
      parts = nil
      Arrow.each_message(body) do |fb, msg, type, payload, at|
        case type
        when Arrow::MESSAGE_SCHEMA
          raise MalformedError.new("a second schema message", offset: at) if schema

          schema = read_schema(fb, fb.table(msg, 2))
          parts = schema[:fields].map { [] }
        when Arrow::MESSAGE_RECORD_BATCH
          raise MalformedError.new("a record batch before the schema", offset: at) unless schema

          rows += read_batch(fb, fb.table(msg, 2), payload, schema, parts, at)
          batches += 1
        else raise MalformedError.new("unsupported Arrow message type #{type} (dictionaries are not used by tables)", offset: at)
        end
      end
      raise TruncatedError.new("the stream ends before its schema", offset: body.bytesize) unless schema
      # SPEC.md section 15.7: even an empty table has its (empty) record batch
      raise TruncatedError.new("the stream ends before its first record batch", offset: body.bytesize) if batches.zero?

      columns = schema[:fields].each_with_index.map do |f, k|
        if f.type == "string"
          Table::Column.new(name: f.name, type: f.type, values: parts[k].flatten(1))
        else
          Table.column_from_bytes(f.name, f.type, parts[k].join.b, packed)
        end
      end
      Table.new(name: schema[:name].to_s, rows: rows, columns: columns)
    end

    # [densewire type, Arrow description] of one schema field.
    def read_schema(fb, schema)
      meta = fb.key_values(schema, 2)
      fields = fb.tables(schema, 1).each_with_index.map do |field, k|
        name = fb.string(field, 0).to_s
        raise InvalidFieldError.new("column #{k} has no name", field: "columns[#{k}].name") if name.empty?
        raise MalformedError.new("column #{k}'s name is not valid UTF-8", field: "columns[#{k}]") unless name.valid_encoding?

        field_meta = fb.key_values(field, 6)
        arrow = arrow_type(fb, field)
        declared = field_meta["densewire.type"]
        Table.check_type!(declared, field: name) if declared
        type = declared || infer(arrow, field_meta)
        unless type && expected(type) == arrow
          raise InvalidFieldError.new("the Arrow type #{arrow.inspect} does not hold #{(declared || "a densewire type").inspect}",
                                      field: name)
        end

        Table::Field.new(name: name, type: type, dimensions: Table.dimensions(type))
      end
      large = fb.tables(schema, 1).map { |field| fb.scalar(field, 2, "C", 0) == TYPE_LARGE_UTF8 }
      table_name = meta["densewire.table"]
      raise MalformedError.new("densewire.table is not valid UTF-8", field: "densewire.table") if table_name && !table_name.valid_encoding?

      { name: table_name, fields: fields, large: large }
    end

    # A comparable description of a field's Arrow type: [:int, 32, true], [:utf8], [:fsl, d, [:float, 1]], ...
    def arrow_type(fb, field)
      type_id = fb.scalar(field, 2, "C", 0)
      type = fb.present?(field, 3) ? fb.table(field, 3) : nil
      case type_id
      when TYPE_BOOL then [:bool]
      when TYPE_INT then [:int, fb.scalar(type, 0, "l<", 0), fb.scalar(type, 1, "C", 0) == 1]
      when TYPE_FLOAT then [:float, fb.scalar(type, 0, "s<", 0)]
      when TYPE_UTF8, TYPE_LARGE_UTF8 then [:utf8]
      when TYPE_FIXED_SIZE_BINARY then [:fsb, fb.scalar(type, 0, "l<", 0)]
      when TYPE_FIXED_SIZE_LIST
        item = fb.tables(field, 5).first or raise MalformedError.new("a FixedSizeList without an item field")
        [:fsl, fb.scalar(type, 0, "l<", 0), arrow_type(fb, item)]
      else [:other, type_id]
      end
    end

    def expected(type)
      case type
      when "bool" then [:bool]
      when "int32" then [:int, 32, true]
      when "int64" then [:int, 64, true]
      when "float32" then [:float, 1]
      when "float64" then [:float, 2]
      when "string" then [:utf8]
      when "uuid" then [:fsb, 16]
      else [:fsl, Table.dimensions(type), [:float, 1]]
      end
    end

    # The type of a field without densewire.type, when its Arrow type says it.
    def infer(arrow, field_meta)
      return "uuid" if arrow == [:fsb, 16] && field_meta["ARROW:extension:name"] == "arrow.uuid"
      return "float32[#{arrow[1]}]" if arrow[0] == :fsl && arrow[2] == [:float, 1] && arrow[1].positive?

      %w[bool int32 int64 float32 float64 string].find { |t| expected(t) == arrow }
    end

    # Appends the batch's values to +parts+ (bytes, or String arrays for strings); its row count.
    def read_batch(fb, batch, payload, schema, parts, at)
      raise MalformedError.new("compressed record batches are not supported", offset: at) if fb.present?(batch, 3)

      n = fb.scalar(batch, 0, "q<", 0)
      raise MalformedError.new("negative row count #{n}", offset: at) if n.negative?

      nodes = fb.structs(batch, 1).each_slice(2).to_a
      buffers = fb.structs(batch, 2).each_slice(2).map do |offset, length|
        if offset.negative? || length.negative? || offset + length > payload.bytesize
          raise MalformedError.new("a buffer lies outside the message body", offset: at)
        end

        payload.byteslice(offset, length)
      end
      schema[:fields].each_with_index do |f, k|
        node = nodes.shift or raise MalformedError.new("too few field nodes", offset: at)
        raise InvalidFieldError.new("#{node[1]} nulls (tables have none)", field: f.name) unless node[1].zero?
        raise MalformedError.new("column #{f.name} has #{node[0]} rows, the batch #{n}", offset: at) unless node[0] == n

        buffers.shift # validity
        if f.type.start_with?("float32[")
          child = nodes.shift or raise MalformedError.new("too few field nodes", offset: at)
          raise InvalidFieldError.new("#{child[1]} null items", field: f.name) unless child[1].zero?

          buffers.shift # the items' validity
        end
        parts[k] << column_part(f, n, buffers, schema[:large][k], at)
      end
      n
    end

    def column_part(f, n, buffers, large, at)
      if f.type == "string"
        offsets = buffers.shift or raise MalformedError.new("too few buffers", offset: at)
        data = buffers.shift or raise MalformedError.new("too few buffers", offset: at)
        return strings(f, n, offsets, data, large, at)
      end

      data = buffers.shift or raise MalformedError.new("too few buffers", offset: at)
      if f.type == "bool"
        raise MalformedError.new("bool buffer too short", offset: at) if data.bytesize * 8 < n

        return data.unpack1("b*")[0, n].tr("01", "\x00\x01").b
      end

      need = n * Table.width(f.type)
      raise LengthMismatchError.new("#{data.bytesize} bytes, #{n} rows need #{need}", offset: data.bytesize, field: f.name) if data.bytesize < need

      data.byteslice(0, need)
    end

    # Utf8 (int32 offsets) or LargeUtf8 (int64 offsets).
    def strings(f, n, offsets, data, large, at)
      width = large ? 8 : 4
      return [] if n.zero?
      raise MalformedError.new("string offsets too short", offset: at) if offsets.bytesize < width * (n + 1)

      list = offsets.unpack("#{large ? "q<" : "l<"}#{n + 1}")
      Array.new(n) do |i|
        a = list[i]
        b = list[i + 1]
        raise MalformedError.new("string offsets out of order or past the data", offset: at) unless a >= 0 && b >= a && b <= data.bytesize

        s = data.byteslice(a, b - a).force_encoding(Encoding::UTF_8)
        raise MalformedError.new("value #{i} is not valid UTF-8", field: f.name) unless s.valid_encoding?

        s
      end
    end
  end
end
