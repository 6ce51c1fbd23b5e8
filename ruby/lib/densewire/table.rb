# frozen_string_literal: true

module Densewire
  # A table of SPEC.md section 15: a name, +rows+ (n) and named, typed columns of n values each.
  #
  #   table = Densewire::Table.decode(body, format: :protobuf)
  #   table.columns.map(&:name)            # => ["uuid", "status", "longitude", "latitude"]
  #   table["longitude"].values            # => [-73.97816027629273, ...]  (Ruby Floats)
  #
  # With +packed: true+ a fixed-width column's +values+ is one binary String of its little-endian
  # bytes in plain order (byte-stream-split bodies are un-split), n * width bytes, so the data can go
  # on to pgvector, numo or another service without a Ruby Float being made per value. Strings stay
  # an Array of Strings either way.
  #
  # Decoders: Densewire::TableProtobuf, TableMsgpack, TableJSON (three layouts), TableCSV, TableArrow;
  # Table.decode dispatches by format or media type.
  class Table
    # Column types of section 15.1: name => [fixed width in bytes (nil: variable), Protobuf enum].
    TYPES = {
      "bool" => [1, 1], "int32" => [4, 2], "int64" => [8, 3], "float32" => [4, 4], "float64" => [8, 5],
      "string" => [nil, 6], "uuid" => [16, 7],
    }.freeze
    VECTOR_ENUM = 8
    VECTOR = /\Afloat32\[([1-9][0-9]*)\]\z/.freeze
    UUID = /\A\h{8}-\h{4}-\h{4}-\h{4}-\h{12}\z/.freeze
    INT_RANGE = { "int32" => (-(2**31)..(2**31 - 1)), "int64" => (-(2**63)..(2**63 - 1)) }.freeze
    PACK = { "int32" => "l<*", "int64" => "q<*", "float32" => "e*", "float64" => "E*" }.freeze
    COLUMNS_HEADER = "Densewire-Columns"
    # The smallest magnitude that rounds to float32 Infinity (2^128 - 2^103): larger is out of range.
    F32_OVERFLOW = (2**128 - 2**103).to_f

    # A column's name and type, as Densewire-Columns or a JSON layout's "columns" declare it.
    # +type+ is the spec's type name ("float32[384]" for vectors), +dimensions+ d for vectors, else nil.
    Field = Struct.new(:name, :type, :dimensions, keyword_init: true) do
      def to_s
        "#{name}=#{type}"
      end
    end

    # One column: +name+, +type+ (a section 15.1 type name), +dimensions+ (d for float32[d], else
    # nil) and +values+: an Array (true/false, Integers, Floats, Strings, UUID strings, or for
    # vectors an Array of d Floats a row), or with +packed?+ the little-endian bytes as one binary
    # String (strings stay an Array).
    class Column
      attr_reader :name, :type, :dimensions, :values

      def initialize(name:, type:, values:, packed: false)
        @name = name
        @type = type
        @dimensions = Table.dimensions(type)
        @values = values
        @packed = packed && !values.is_a?(Array)
      end

      def packed?
        @packed
      end

      # Bytes of one value (nil for strings).
      def width
        Table.width(type)
      end

      # The values as Ruby objects, whatever the column holds.
      def to_a
        packed? ? Table.unpack(values, type) : values
      end

      # The little-endian bytes of a fixed-width column (raises for strings).
      def to_packed
        raise ArgumentError, "string columns have no fixed-width bytes" if width.nil?

        packed? ? values : Table.pack(values, type, name)
      end

      def size
        return values.size unless packed?

        values.bytesize / width
      end

      def ==(other)
        other.is_a?(Column) && name == other.name && type == other.type && Table.same_values?(self, other)
      end

      def inspect
        "#<Densewire::Table::Column #{name}=#{type} #{packed? ? "(#{values.bytesize} bytes)" : "(#{values.size} values)"}>"
      end
    end

    attr_reader :name, :rows, :columns
    # Set by Client#table from the response: pass +etag+ back as +if_none_match+.
    attr_accessor :etag, :last_modified, :content_type

    def initialize(name:, rows:, columns:)
      @name = name
      @rows = rows
      @columns = columns
    end

    # The column named +name+ (or at index +name+), or nil.
    def [](name)
      name.is_a?(Integer) ? columns[name] : columns.find { |c| c.name == name }
    end

    def fields
      columns.map { |c| Field.new(name: c.name, type: c.type, dimensions: c.dimensions) }
    end

    # The Densewire-Columns value of this table's columns.
    def columns_header
      Table.columns_header(fields)
    end

    # Row +i+ as a Hash of column name => value.
    def row(i)
      columns.to_h { |c| [c.name, Table.value_at(c, i)] }
    end

    # Every row as a Hash (Ruby objects for every value: this materializes the whole table).
    def each_row
      return enum_for(:each_row) unless block_given?

      arrays = columns.map(&:to_a)
      rows.times { |i| yield columns.each_with_index.to_h { |c, k| [c.name, arrays[k][i]] } }
    end

    def ==(other)
      other.is_a?(Table) && name == other.name && rows == other.rows && columns == other.columns
    end

    def inspect
      "#<Densewire::Table #{name.inspect} rows=#{rows} #{columns_header}>"
    end

    # Media types of section 15.9 by format, in the server's order of preference.
    MEDIA_TYPES = {
      json: "application/json", json_rows: "application/vnd.densewire.rows+json",
      json_columns: "application/vnd.densewire.columns+json", csv: "text/csv", msgpack: "application/vnd.msgpack",
      protobuf: "application/protobuf", arrow: "application/vnd.apache.arrow.stream"
    }.freeze
    MEDIA_ALIASES = { "application/msgpack" => :msgpack, "application/x-msgpack" => :msgpack,
                      "application/x-protobuf" => :protobuf }.freeze
    # The values of the format query parameter.
    FORMAT_PARAMS = { json: "json", json_rows: "json-rows", json_columns: "json-columns", csv: "csv", msgpack: "msgpack",
                      protobuf: "protobuf", arrow: "arrow" }.freeze

    class << self
      # Decodes a table body. +format+: :protobuf, :msgpack, :json (objects), :json_rows,
      # :json_columns, :csv, :arrow (or the spec's names "json-rows", ...), or +content_type+.
      # +headers+ (any Hash-like with case-insensitive or exact names, a Net::HTTPResponse works) give
      # Densewire-Columns / -Table / -Rows to the formats without types (JSON objects, CSV);
      # +columns+ (Fields, [name, type] pairs or a Densewire-Columns String) gives them directly.
      def decode(body, format: nil, content_type: nil, headers: nil, columns: nil, name: nil, packed: false)
        fmt = format ? format_key(format) : format_of(content_type)
        raise UnsupportedMediaTypeError.new("unknown table Content-Type #{content_type.inspect}", field: "Content-Type") unless fmt

        case fmt
        when :protobuf then TableProtobuf.decode(body, packed: packed)
        when :msgpack then TableMsgpack.decode(body, packed: packed)
        when :json_rows then TableJSON.decode_rows(body, packed: packed)
        when :json_columns then TableJSON.decode_columns(body, packed: packed)
        when :arrow then TableArrow.decode(body, packed: packed)
        when :json, :csv
          fields, name, rows = schema_from(headers, columns, name)
          if fmt == :json
            TableJSON.decode_objects(body, columns: fields, name: name, rows: rows, packed: packed)
          else
            TableCSV.decode(body, columns: fields, name: name, rows: rows, packed: packed)
          end
        end
      end

      def format_key(format)
        key = format.to_s.tr("-", "_").to_sym
        raise ArgumentError, "unknown table format #{format.inspect} (known: #{MEDIA_TYPES.keys.join(", ")})" unless MEDIA_TYPES.key?(key)

        key
      end

      # The format of a Content-Type value, or nil.
      def format_of(content_type)
        type = content_type.to_s.split(";", 2).first.to_s.strip.downcase
        MEDIA_TYPES.key(type) || MEDIA_ALIASES[type]
      end

      # ---------------------------------------------------------------- Densewire-Columns
      # Parses a Densewire-Columns value (section 15.2) into Fields. A malformed entry or percent
      # escape is invalid_field on the header; an unknown type is unknown_dtype.
      def parse_columns_header(value, field: COLUMNS_HEADER)
        raise InvalidFieldError.new("missing", field: field) if value.nil?

        value = value.to_s
        return [] if value.strip.empty?

        seen = {}
        value.split(",", -1).map do |entry|
          raw_name, type = entry.strip.split("=", 2)
          raise InvalidFieldError.new("entry #{entry.inspect} is not name=type", field: field) if type.nil? || raw_name.empty?
          raise InvalidFieldError.new("bad percent escape in #{raw_name.inspect}", field: field) if raw_name.match?(/%(?!\h\h)/)

          name = raw_name.gsub(/%(\h\h)/) { Regexp.last_match(1).hex.chr }.force_encoding(Encoding::UTF_8)
          raise InvalidFieldError.new("column name #{raw_name.inspect} is not UTF-8", field: field) unless name.valid_encoding?
          raise InvalidFieldError.new("column #{name.inspect} appears twice", field: field) if seen[name]

          seen[name] = true
          field_of(name, type, field: field)
        end
      end

      # The Densewire-Columns value for +fields+ (Fields or Columns).
      def columns_header(fields)
        fields.map { |f| "#{percent_encode(f.name)}=#{f.type}" }.join(",")
      end

      def percent_encode(name)
        name.to_s.b.gsub(/[^A-Za-z0-9\-._~]/n) { |c| format("%%%02X", c.ord) }
      end

      # A Field for +name+ and +type+; an unknown type is unknown_dtype on +field+.
      def field_of(name, type, field:)
        d = check_type!(type, field: field)
        Field.new(name: name, type: type, dimensions: d)
      end

      # d for a vector type, nil for the other known types; unknown_dtype otherwise.
      def check_type!(type, field:)
        unless type.is_a?(String)
          raise InvalidFieldError.new("a column type must be a string, got #{type.inspect[0, 40]}", field: field)
        end
        raise UnknownDtypeError.new("the column type is not valid UTF-8", field: field) unless type.valid_encoding?
        return nil if TYPES.key?(type)

        m = VECTOR.match(type)
        return Integer(m[1]) if m

        raise UnknownDtypeError.new("unknown column type #{type.inspect} (known: #{TYPES.keys.join(", ")}, float32[d])",
                                    field: field)
      end

      def dimensions(type)
        m = VECTOR.match(type)
        m && Integer(m[1])
      end

      # Bytes of one value of +type+ (nil for string).
      def width(type)
        return TYPES[type][0] if TYPES.key?(type)

        4 * dimensions(type)
      end

      # The type name of a Protobuf enum value and dimensions.
      def proto_enum(type)
        TYPES.key?(type) ? TYPES[type][1] : VECTOR_ENUM
      end

      # ---------------------------------------------------------------- values
      # Ruby values of a column's little-endian bytes.
      def unpack(data, type)
        case type
        when "bool" then data.bytes.map { |b| b == 1 }
        when "uuid" then data.unpack("H32" * (data.bytesize / 16)).map { |h| uuid_text(h) }
        when "string" then data
        else
          return data.unpack(PACK[type]) if PACK.key?(type)

          data.unpack("e*").each_slice(dimensions(type)).to_a
        end
      end

      # Checks the bool bytes of +data+ (0 or 1): invalid_field on FIELD[ROW] otherwise.
      def check_bools!(data, field)
        bad = data.index(/[^\x00\x01]/n)
        raise InvalidFieldError.new("bool byte #{data.getbyte(bad)} is neither 0 nor 1", field: "#{field}[#{bad}]") if bad
      end

      def uuid_text(hex)
        "#{hex[0, 8]}-#{hex[8, 4]}-#{hex[12, 4]}-#{hex[16, 4]}-#{hex[20, 12]}"
      end

      # The little-endian bytes of Ruby +values+ (already checked) of a fixed-width +type+.
      def pack(values, type, _name = nil)
        pack_values(values, type).b
      end

      def pack_values(values, type)
        case type
        when "bool" then values.map { |v| v ? 1 : 0 }.pack("C*")
        when "uuid" then values.map { |u| u.delete("-") }.pack("H32" * values.size)
        when "int32", "int64", "float64" then values.pack(PACK[type])
        when "float32" then Convert.pack_float32(values)
        else Convert.pack_float32(values.flatten)
        end
      end

      # A Column from little-endian +data+ (already length-checked); +packed+ keeps the bytes.
      def column_from_bytes(name, type, data, packed)
        Column.new(name: name, type: type, values: packed ? data : unpack(data, type), packed: packed)
      end

      # A Column from checked Ruby +values+ (of a text format); +packed+ packs the fixed-width ones.
      # float32 values are rounded to float32 (section 3.3) either way, as a binary body would give them.
      def column_from_values(name, type, values, packed)
        if packed && type != "string"
          Column.new(name: name, type: type, values: pack(values, type), packed: true)
        elsif type.start_with?("float32")
          Column.new(name: name, type: type, values: unpack(pack(values, type), type))
        else
          Column.new(name: name, type: type, values: values)
        end
      end

      def value_at(column, i)
        return column.values[i] unless column.packed?

        w = column.width
        unpack(column.values.byteslice(i * w, w), column.type).first
      end

      def same_values?(a, b)
        return a.values == b.values if a.type == "string"

        a.to_packed == b.to_packed # by bits: NaN equals itself, -0.0 differs from 0.0
      end

      # ---------------------------------------------------------------- byte stream split
      # Parquet's BYTE_STREAM_SPLIT: m items of w bytes; byte k of item i is at data[k*m + i].
      # The plain bytes of byte-stream-split +data+ (items of +w+ bytes). Widths 2, 4, 8 and 16 (every
      # splittable type) transpose w x w byte blocks with Integer (bignum) masks, all blocks at once,
      # which is about twice as fast as going byte by byte (unsplit_bytewise, the reference).
      def unsplit(data, w)
        return data if w == 1 || data.empty?
        return unsplit_bytewise(data, w) unless [2, 4, 8, 16].include?(w)

        m = data.bytesize / w
        padded = (m + w - 1) / w * w
        pad = "\0".b * (padded - m)
        rows = Array.new(w) { |k| le_integer(data.byteslice(k * m, m) + pad) }
        d = w / 2
        while d >= 1 # swap d-byte sub-blocks between rows k and k + d
          mask = block_mask(d, padded)
          shift = 8 * d
          w.times do |k|
            next unless (k & d).zero?

            t = ((rows[k] >> shift) ^ rows[k + d]) & mask
            rows[k + d] ^= t
            rows[k] ^= t << shift
          end
          d /= 2
        end
        # Row k now holds, in its w-byte chunk j, item j * w + k: interleave the rows' chunks.
        chunks = rows.map { |r| le_bytes(r, padded).unpack("Q<*") }
        chunks = chunks.map { |c| c.each_slice(2).to_a } if w == 16
        out = w >= 8 ? chunks.transpose.flatten!.pack("Q<*") : nil
        out ||= rows.map { |r| le_bytes(r, padded).unpack(w == 2 ? "S<*" : "L<*") }.transpose.flatten!.pack(w == 2 ? "S<*" : "L<*")
        out.byteslice(0, m * w)
      end

      def unsplit_bytewise(data, w)
        return data if w == 1 || data.empty?

        m = data.bytesize / w
        streams = Array.new(w) { |k| data.byteslice(k * m, m).unpack("C*") }
        streams[0].zip(*streams[1..]).flatten!.pack("C*")
      end

      def le_integer(bytes)
        bytes.reverse.unpack1("H*").to_i(16)
      end

      def le_bytes(integer, size)
        [integer.to_s(16).rjust(2 * size, "0")].pack("H*").reverse
      end

      # Bytes 0...d of every 2d-byte group set, over +size+ bytes (cached: tables repeat sizes).
      def block_mask(d, size)
        @block_masks ||= {}
        @block_masks.shift while @block_masks.size > 16
        @block_masks[[d, size]] ||= le_integer((("\xFF".b * d) + ("\0".b * d)) * (size / (2 * d)))
      end

      def split(data, w)
        return data if w == 1 || data.empty?

        data.unpack("C*").each_slice(w).to_a.transpose.flatten!.pack("C*")
      end

      # ---------------------------------------------------------------- text values
      # A Ruby value (as JSON.parse gives it) checked against +type+: invalid_field on +path+ when
      # of the wrong kind or out of range. Vectors of the wrong length are shape_mismatch.
      def json_value(v, type, path)
        case type
        when "bool"
          return v if v == true || v == false
        when "int32", "int64"
          return v if v.is_a?(Integer) && INT_RANGE[type].cover?(v)
        when "float64"
          return v.to_f if v.is_a?(Numeric) && v.to_f.finite?
        when "float32"
          return v.to_f if v.is_a?(Numeric) && v.to_f.abs < F32_OVERFLOW
        when "string"
          return v if v.is_a?(String)
        when "uuid"
          return v.downcase if v.is_a?(String) && v.match?(UUID)
        else
          d = dimensions(type)
          if v.is_a?(Array)
            raise ShapeMismatchError.new("#{v.size} items, the type #{type} has #{d}", field: path) unless v.size == d

            v.each_with_index { |x, j| json_value(x, "float32", "#{path}[#{j}]") }
            return v.map(&:to_f)
          end
        end
        raise InvalidFieldError.new("#{v.inspect[0, 60]} is not a #{type} value", field: path)
      end

      private

      # [fields, name, rows] from Densewire-* headers and/or explicit columns.
      def schema_from(headers, columns, name)
        h = ->(key) { header(headers, key) }
        fields =
          case columns
          when nil
            value = h.call(COLUMNS_HEADER)
            raise InvalidFieldError.new("missing: JSON objects and CSV need the column types", field: COLUMNS_HEADER) unless value

            parse_columns_header(value)
          when String then parse_columns_header(columns)
          else columns.map.with_index { |c, i| to_field(c, i) }
          end
        rows = h.call("Densewire-Rows")
        rows = rows && (Integer(rows, 10, exception: false) or raise InvalidFieldError.new("not a row count: #{rows.inspect}", field: "Densewire-Rows"))
        [fields, name || h.call("Densewire-Table"), rows]
      end

      def to_field(c, i)
        return c if c.is_a?(Field)

        name, type = c.is_a?(Hash) ? [c[:name] || c["name"], c[:type] || c["type"]] : c
        field_of(name.to_s, type.to_s, field: "columns[#{i}].type")
      end

      def header(headers, key)
        return nil if headers.nil?
        return headers[key] if headers.respond_to?(:each_header) # Net::HTTPResponse: case-insensitive

        headers[key] || headers.find { |k, _| k.to_s.casecmp?(key) }&.last
      end
    end
  end
end
