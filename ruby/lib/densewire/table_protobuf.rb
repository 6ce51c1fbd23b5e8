# frozen_string_literal: true

module Densewire
  # The columnar Protobuf body of SPEC.md section 15.6 (application/protobuf), message
  # densewire.v1.Table of proto/densewire/v1/table.proto. Read and written with the gem's own wire
  # reader (Densewire::Protobuf::Reader), so errors carry the spec's offsets; no gem is needed.
  module TableProtobuf
    PLAIN = 0
    BYTE_STREAM_SPLIT = 1

    module_function

    # ---------------------------------------------------------------- writer
    # The body of +table+. +encoding+: :plain, or :byte_stream_split (what densewire's server
    # writes) for every fixed-width column of width >= 2.
    def encode(table, encoding: :byte_stream_split)
      split = encoding.to_s == "byte_stream_split"
      out = +"".b
      name = table.name.to_s.b
      out << Protobuf.field_bytes(1, name) unless name.empty?
      out << Protobuf.varint(2 << 3) << Protobuf.varint(table.rows) unless table.rows.zero?
      table.columns.each { |c| out << Protobuf.field_bytes(3, column_bytes(c, split)) }
      out
    end

    def column_bytes(column, split)
      out = +"".b
      name = column.name.to_s.b
      out << Protobuf.field_bytes(1, name) unless name.empty?
      out << Protobuf.varint(2 << 3) << Protobuf.varint(Table.proto_enum(column.type))
      out << Protobuf.varint(3 << 3) << Protobuf.varint(column.dimensions) if column.dimensions
      if column.type == "string"
        values = column.values.map { |v| v.to_s.b }
        data = values.join
        out << Protobuf.field_bytes(5, data) unless data.empty?
        out << Protobuf.field_bytes(6, values.map { |v| Protobuf.varint(v.bytesize) }.join) unless values.empty?
      else
        data = column.to_packed
        if split && column.type != "bool"
          out << Protobuf.varint(4 << 3) << Protobuf.varint(BYTE_STREAM_SPLIT)
          data = Table.split(data, column.dimensions ? 4 : column.width)
        end
        out << Protobuf.field_bytes(5, data) unless data.empty?
      end
      out
    end

    # ---------------------------------------------------------------- reader
    # Decodes a body into a Table (+packed+: fixed-width values as little-endian bytes).
    def decode(body, packed: false)
      body = body.to_s.b
      r = Protobuf::Reader.new(body, 0, body.bytesize, true)
      name = ""
      rows = 0
      raw_columns = []
      while r.more?
        number, wire, at = r.tag
        case number
        when 1
          Protobuf.wrong_wire("name", at) unless wire == 2
          name = utf8!(r.bytes(at), at, "name")
        when 2
          Protobuf.wrong_wire("rows", at) unless wire.zero?
          rows = r.varint & 0xFFFF_FFFF_FFFF_FFFF
        when 3
          Protobuf.wrong_wire("columns", at) unless wire == 2
          payload = r.bytes(at)
          raw_columns << read_column(body, r.pos - payload.bytesize, r.pos, "columns[#{raw_columns.size}].")
        else r.skip(wire, at, number)
        end
      end
      columns = raw_columns.each_with_index.map { |c, i| build_column(c, rows, "columns[#{i}]", packed) }
      Table.new(name: name, rows: rows, columns: columns)
    end

    def utf8!(bytes, at, field)
      text = bytes.force_encoding(Encoding::UTF_8)
      raise MalformedError.new("not valid UTF-8", offset: at, field: field) unless text.valid_encoding?

      text
    end

    # The fields of one Column message (wire-format errors at their absolute offsets).
    def read_column(body, start, limit, prefix)
      r = Protobuf::Reader.new(body, start, limit, false)
      c = { name: "", type: 0, dimensions: 0, encoding: PLAIN, data: "".b, data_at: start, lengths: [] }
      while r.more?
        number, wire, at = r.tag
        case number
        when 1
          Protobuf.wrong_wire("#{prefix}name", at) unless wire == 2
          c[:name] = utf8!(r.bytes(at), at, "#{prefix}name")
        when 2, 3, 4
          Protobuf.wrong_wire("#{prefix}#{%w[type dimensions encoding][number - 2]}", at) unless wire.zero?
          c[%i[type dimensions encoding][number - 2]] = r.varint
        when 5
          Protobuf.wrong_wire("#{prefix}data", at) unless wire == 2
          c[:data] = r.bytes(at)
          c[:data_at] = r.pos - c[:data].bytesize
        when 6
          if wire == 2
            payload = r.bytes(at)
            packed = Protobuf::Reader.new(body, r.pos - payload.bytesize, r.pos, false)
            begin
              c[:lengths] << (packed.varint & 0xFFFF_FFFF) while packed.more?
            rescue MalformedError
              raise MalformedError.new("a packed length runs past the end of its field", offset: at)
            end
          elsif wire.zero?
            c[:lengths] << (r.varint & 0xFFFF_FFFF)
          else
            Protobuf.wrong_wire("#{prefix}lengths", at)
          end
        else r.skip(wire, at, number)
        end
      end
      c
    end

    def build_column(c, rows, field, packed)
      type = column_type(c, field)
      if type == "string"
        raise InvalidFieldError.new("string columns are PLAIN", field: "#{field}.encoding") unless c[:encoding] == PLAIN

        return Table::Column.new(name: c[:name], type: type, values: strings(c, rows, field))
      end

      width = Table.width(type)
      unless [PLAIN, BYTE_STREAM_SPLIT].include?(c[:encoding]) && !(type == "bool" && c[:encoding] == BYTE_STREAM_SPLIT)
        raise InvalidFieldError.new("encoding #{c[:encoding]} is not valid for #{type}", field: "#{field}.encoding")
      end

      data = c[:data]
      expected = rows * width
      unless data.bytesize == expected
        raise LengthMismatchError.new("#{data.bytesize} bytes, #{rows} rows of #{type} need #{expected}",
                                      offset: [data.bytesize, expected].min, field: "#{field}.data")
      end
      data = Table.unsplit(data, type.start_with?("float32[") ? 4 : width) if c[:encoding] == BYTE_STREAM_SPLIT
      Table.check_bools!(data, "#{field}.data") if type == "bool"
      Table.column_from_bytes(c[:name], type, data, packed)
    end

    def column_type(c, field)
      raise InvalidFieldError.new("absent or 0", field: "#{field}.type") if c[:type].zero?

      type = Table::TYPES.find { |_, (_, e)| e == c[:type] }&.first
      if c[:type] == Table::VECTOR_ENUM
        raise InvalidFieldError.new("a float32 vector needs dimensions >= 1", field: "#{field}.dimensions") if c[:dimensions].zero?

        return "float32[#{c[:dimensions]}]"
      end
      raise UnknownDtypeError.new("unknown ColumnType enum value #{c[:type]}", field: "#{field}.type") unless type
      raise InvalidFieldError.new("dimensions are for float32 vectors only", field: "#{field}.dimensions") unless c[:dimensions].zero?

      type
    end

    def strings(c, rows, field)
      lengths = c[:lengths]
      unless lengths.size == rows
        raise ShapeMismatchError.new("#{lengths.size} lengths for #{rows} rows", field: "#{field}.lengths")
      end

      data = c[:data]
      total = lengths.sum
      unless total == data.bytesize
        raise LengthMismatchError.new("the lengths add up to #{total} bytes, data has #{data.bytesize}",
                                      offset: [data.bytesize, total].min, field: "#{field}.data")
      end
      text = data.dup.force_encoding(Encoding::UTF_8)
      raise MalformedError.new("not valid UTF-8", offset: c[:data_at], field: "#{field}.data") unless text.valid_encoding?

      pos = 0
      lengths.map do |len|
        s = data.byteslice(pos, len).force_encoding(Encoding::UTF_8)
        raise MalformedError.new("value #{pos} is not valid UTF-8", offset: c[:data_at] + pos, field: "#{field}.data") unless s.valid_encoding?

        pos += len
        s
      end
    end
  end
end
