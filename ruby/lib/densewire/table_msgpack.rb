# frozen_string_literal: true

module Densewire
  # The columnar MessagePack body of SPEC.md section 15.5 (application/vnd.msgpack): a map
  # {"name", "rows", "columns": [{"name", "type", "data"}, ...]}, data a bin of little-endian values
  # for fixed-width types and an array of str for strings. Uses the msgpack gem (Debian:
  # ruby-msgpack), loaded on first use, after the body's structure and every declared length have
  # been checked (Msgpack::Scanner), so a short body cannot make the gem allocate gigabytes.
  module TableMsgpack
    module_function

    # The body for +table+: the spec's key order and the smallest representations (byte-exact).
    def encode(table)
      columns = table.columns.map do |c|
        data = c.type == "string" ? c.values.map { |v| Msgpack.utf8(v.to_s) } : c.to_packed.b
        { "name" => Msgpack.utf8(c.name.to_s), "type" => Msgpack.utf8(c.type), "data" => data }
      end
      Msgpack.library.pack({ "name" => Msgpack.utf8(table.name.to_s), "rows" => table.rows, "columns" => columns })
    end

    # Decodes a body into a Table (+packed+: fixed-width values as little-endian bytes).
    def decode(body, packed: false)
      lib = Msgpack.library
      body = body.to_s.b
      size = body.bytesize
      raise TruncatedError.new("the body is empty", offset: 0) if size.zero?
      raise MalformedError.new("the body is not a map", offset: 0) unless Msgpack.map_marker?(body.getbyte(0))

      stop = Msgpack::Scanner.new(body).skip(0, 0)
      raise MalformedError.new("#{size - stop} bytes follow the map", offset: stop) if stop < size

      unpacker = lib::Unpacker.new(allow_unknown_ext: true)
      unpacker.feed(body)
      pos = -> { size - unpacker.buffer.size }
      fields = {}
      count = Msgpack.guard(lib, size, 0) { unpacker.read_map_header }
      count.times do
        at = pos.call
        key = Msgpack.guard(lib, size, at) { unpacker.read }
        raise MalformedError.new("map key is not a str: #{key.inspect[0, 40]}", offset: at) unless Msgpack.str?(key)

        fields[key] = Msgpack.guard(lib, size, pos.call) { unpacker.read }
      end
      table_of(fields, packed)
    end

    def table_of(fields, packed)
      name = fields["name"]
      raise InvalidFieldError.new("not a str", field: "name") unless name.nil? || Msgpack.str?(name)
      raise MalformedError.new("not valid UTF-8", field: "name") unless name.nil? || name.valid_encoding?

      rows = fields["rows"]
      raise InvalidFieldError.new("missing or not a non-negative integer", field: "rows") unless rows.is_a?(Integer) && rows >= 0

      columns = fields["columns"]
      raise InvalidFieldError.new("missing or not an array", field: "columns") unless columns.is_a?(Array)

      seen = {}
      built = columns.each_with_index.map do |c, i|
        col = column_of(c, rows, "columns[#{i}]", packed)
        raise InvalidFieldError.new("column #{col.name.inspect} appears twice", field: "columns[#{i}].name") if seen[col.name]

        seen[col.name] = true
        col
      end
      Table.new(name: name.to_s, rows: rows, columns: built)
    end

    def column_of(c, rows, field, packed)
      raise InvalidFieldError.new("a column must be a map", field: field) unless c.is_a?(Hash)

      name = c["name"]
      raise InvalidFieldError.new("missing or not a str", field: "#{field}.name") unless Msgpack.str?(name) && !name.empty?
      raise MalformedError.new("not valid UTF-8", field: "#{field}.name") unless name.valid_encoding?

      type = c["type"]
      raise InvalidFieldError.new("missing or not a str", field: "#{field}.type") unless Msgpack.str?(type)

      Table.check_type!(type, field: "#{field}.type")
      data = c["data"]
      if type == "string"
        unless data.is_a?(Array) && data.all? { |v| Msgpack.str?(v) }
          raise InvalidFieldError.new("a string column's data must be an array of str", field: "#{field}.data")
        end
        raise ShapeMismatchError.new("#{data.size} strings for #{rows} rows", field: "#{field}.data") unless data.size == rows

        bad = data.index { |v| !v.valid_encoding? }
        raise MalformedError.new("value #{bad} is not valid UTF-8", field: "#{field}.data[#{bad}]") if bad

        return Table::Column.new(name: name, type: type, values: data)
      end

      unless data.is_a?(String) && data.encoding == Encoding::BINARY
        raise InvalidFieldError.new("missing or not bin", field: "#{field}.data")
      end

      expected = rows * Table.width(type)
      unless data.bytesize == expected
        raise LengthMismatchError.new("#{data.bytesize} bytes, #{rows} rows of #{type} need #{expected}",
                                      offset: [data.bytesize, expected].min, field: "#{field}.data")
      end
      Table.check_bools!(data, "#{field}.data") if type == "bool"
      Table.column_from_bytes(name, type, data, packed)
    end
  end
end
