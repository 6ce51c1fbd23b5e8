# frozen_string_literal: true

require "json"

module Densewire
  # The three JSON layouts of SPEC.md section 15.3:
  # objects (application/json, types from Densewire-Columns or the caller),
  # rows (application/vnd.densewire.rows+json) and columns (application/vnd.densewire.columns+json).
  # Numbers are the shortest decimals that read back to the same bits in the column's type; NaN and
  # Infinity have no JSON form, so encoding them fails with non_finite on COLUMN[ROW].
  module TableJSON
    module_function

    # ---------------------------------------------------------------- decoding
    # Objects: an array of one object per row, with exactly the columns' keys. +columns+: Fields
    # (Table.parse_columns_header) giving names and types; +rows+, when known (Densewire-Rows), must match.
    def decode_objects(text, columns:, name: nil, rows: nil, packed: false)
      doc = parse(text)
      raise MalformedError.new("the objects layout is an array of objects") unless doc.is_a?(Array)
      if rows && doc.size != rows
        raise ShapeMismatchError.new("#{doc.size} objects, Densewire-Rows says #{rows}", field: "Densewire-Rows")
      end

      names = columns.map(&:name)
      values = columns.map { [] }
      doc.each_with_index do |obj, i|
        raise InvalidFieldError.new("a row must be an object", field: "[#{i}]") unless obj.is_a?(Hash)

        columns.each_with_index do |col, k|
          raise InvalidFieldError.new("missing key", field: "[#{i}].#{col.name}") unless obj.key?(col.name)

          values[k] << Table.json_value(obj[col.name], col.type, "[#{i}].#{col.name}")
        end
        next if obj.size == names.size

        extra = obj.keys.find { |key| !names.include?(key) }
        raise InvalidFieldError.new("unknown key", field: "[#{i}].#{extra}")
      end
      build(name.to_s, doc.size, columns, values, packed)
    end

    # Rows: {"name", "columns": [{"name", "type"}], "rows": [[...], ...]}.
    def decode_rows(text, packed: false)
      doc = object(parse(text))
      columns = fields(doc["columns"])
      rows = doc["rows"]
      raise InvalidFieldError.new("missing or not an array", field: "rows") unless rows.is_a?(Array)

      values = columns.map { [] }
      rows.each_with_index do |row, i|
        raise InvalidFieldError.new("a row must be an array", field: "rows[#{i}]") unless row.is_a?(Array)
        unless row.size == columns.size
          raise ShapeMismatchError.new("#{row.size} values for #{columns.size} columns", field: "rows[#{i}]")
        end

        columns.each_with_index { |col, k| values[k] << Table.json_value(row[k], col.type, "rows[#{i}][#{k}]") }
      end
      build(name_of(doc), rows.size, columns, values, packed)
    end

    # Columns: {"name", "rows": n, "columns": [{"name", "type", "values": [...]}]}.
    def decode_columns(text, packed: false)
      doc = object(parse(text))
      n = doc["rows"]
      raise InvalidFieldError.new("missing or not a non-negative integer", field: "rows") unless n.is_a?(Integer) && n >= 0

      columns = fields(doc["columns"])
      values = columns.each_with_index.map do |col, k|
        list = doc["columns"][k]["values"]
        raise InvalidFieldError.new("missing or not an array", field: "columns[#{k}].values") unless list.is_a?(Array)
        unless list.size == n
          raise ShapeMismatchError.new("#{list.size} values, rows is #{n}", field: "columns[#{k}].values")
        end

        list.each_with_index.map { |v, i| Table.json_value(v, col.type, "columns[#{k}].values[#{i}]") }
      end
      build(name_of(doc), n, columns, values, packed)
    end

    def parse(text)
      text = text.to_s.dup.force_encoding(Encoding::UTF_8)
      raise MalformedError.new("the JSON text is not valid UTF-8") unless text.valid_encoding?

      JSON.parse(text)
    rescue JSON::ParserError => e
      raise MalformedError.new("not valid JSON: #{e.message[0, 120]}")
    end

    def object(doc)
      raise MalformedError.new("the body is not a JSON object") unless doc.is_a?(Hash)

      doc
    end

    def name_of(doc)
      name = doc["name"]
      raise InvalidFieldError.new("not a string", field: "name") unless name.nil? || name.is_a?(String)

      name.to_s
    end

    def fields(columns)
      raise InvalidFieldError.new("missing or not an array", field: "columns") unless columns.is_a?(Array)

      seen = {}
      columns.each_with_index.map do |c, k|
        raise InvalidFieldError.new("a column must be an object", field: "columns[#{k}]") unless c.is_a?(Hash)

        name = c["name"]
        raise InvalidFieldError.new("missing or not a non-empty string", field: "columns[#{k}].name") unless name.is_a?(String) && !name.empty?
        raise InvalidFieldError.new("column #{name.inspect} appears twice", field: "columns[#{k}].name") if seen[name]

        seen[name] = true
        Table.field_of(name, c["type"], field: "columns[#{k}].type")
      end
    end

    def build(name, rows, columns, values, packed)
      cols = columns.each_with_index.map { |f, k| Table.column_from_values(f.name, f.type, values[k], packed) }
      Table.new(name: name, rows: rows, columns: cols)
    end

    # ---------------------------------------------------------------- encoding
    # The objects layout of +table+.
    def encode_objects(table)
      keys = table.columns.map { |c| "#{JSON.generate(c.name)}:" }
      cols = json_columns(table)
      out = +"["
      table.rows.times do |i|
        out << "," unless i.zero?
        out << "{"
        cols.each_with_index { |vals, k| out << (k.zero? ? "" : ",") << keys[k] << vals[i] }
        out << "}"
      end
      out << "]"
    end

    # The rows layout of +table+.
    def encode_rows(table)
      cols = json_columns(table)
      rows = Array.new(table.rows) { |i| "[#{cols.map { |v| v[i] }.join(",")}]" }
      %({"name":#{JSON.generate(table.name.to_s)},"columns":#{schema(table)},"rows":[#{rows.join(",")}]})
    end

    # The columns layout of +table+.
    def encode_columns(table)
      cols = json_columns(table).each_with_index.map do |vals, k|
        c = table.columns[k]
        %({"name":#{JSON.generate(c.name)},"type":#{JSON.generate(c.type)},"values":[#{vals.join(",")}]})
      end
      %({"name":#{JSON.generate(table.name.to_s)},"rows":#{table.rows},"columns":[#{cols.join(",")}]})
    end

    def schema(table)
      "[#{table.columns.map { |c| %({"name":#{JSON.generate(c.name)},"type":#{JSON.generate(c.type)}}) }.join(",")}]"
    end

    # Each column's values as JSON texts.
    def json_columns(table)
      table.columns.map do |c|
        case c.type
        when "bool", "int32", "int64" then c.to_a.map(&:to_s)
        when "string", "uuid" then c.to_a.map { |v| JSON.generate(v) }
        when "float32", "float64"
          numbers(c.to_packed, c.type, c.name)
        else
          d = c.dimensions
          flat = numbers(c.to_packed, "float32", c.name, d)
          flat.each_slice(d).map { |row| "[#{row.join(",")}]" }
        end
      end
    end

    # The shortest decimals of little-endian float bytes; non_finite on NAME[ROW] for NaN/Infinity.
    def numbers(data, type, name, per_row = 1)
      bits = data.unpack(type == "float32" ? "L<*" : "Q<*")
      values = data.unpack(type == "float32" ? "e*" : "E*")
      values.each_with_index.map do |v, i|
        raise NonFiniteError.new("#{v} has no JSON form", field: "#{name}[#{i / per_row}]") unless v.finite?

        Convert.shortest_decimal(v, bits[i], type)
      end
    end
  end
end
