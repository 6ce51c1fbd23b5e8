# frozen_string_literal: true

require "csv"

module Densewire
  # The CSV body of SPEC.md section 15.4 (text/csv; charset=utf-8; header=present), RFC 4180, with
  # the types from Densewire-Columns (or the caller). Floats may be NaN, Infinity, -Infinity;
  # vectors are pgvector's text form "[1.0,2.0]". Uses Ruby's csv library (a default gem).
  module TableCSV
    NUMBER = /\A-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?\z/.freeze
    INTEGER = /\A-?[0-9]+\z/.freeze
    SPECIALS = { "NaN" => Float::NAN, "Infinity" => Float::INFINITY, "-Infinity" => -Float::INFINITY }.freeze

    module_function

    # Decodes CSV text into a Table of +columns+ (Fields). +rows+, when known (Densewire-Rows), must match.
    def decode(text, columns:, name: nil, rows: nil, packed: false)
      text = text.to_s.dup.force_encoding(Encoding::UTF_8)
      raise MalformedError.new("the CSV body is not valid UTF-8") unless text.valid_encoding?

      csv = CSV.new(text, row_sep: :auto, liberal_parsing: false)
      header = read(csv, text)
      names = columns.map(&:name)
      unless header && header.map(&:to_s) == names
        raise ShapeMismatchError.new("the header line #{header.inspect[0, 120]} does not name the columns #{names.inspect[0, 120]}",
                                     field: "header")
      end

      values = columns.map { [] }
      count = 0
      while (record = read(csv, text))
        line = count + 2
        unless record.size == columns.size
          raise ShapeMismatchError.new("#{record.size} fields, the table has #{columns.size} columns", field: "line #{line}")
        end

        columns.each_with_index { |col, k| values[k] << value(record[k], col, line) }
        count += 1
      end
      if rows && count != rows
        raise ShapeMismatchError.new("#{count} lines of values, Densewire-Rows says #{rows}", field: "Densewire-Rows")
      end

      cols = columns.each_with_index.map { |f, k| Table.column_from_values(f.name, f.type, values[k], packed) }
      Table.new(name: name.to_s, rows: count, columns: cols)
    end

    def read(csv, text)
      csv.shift
    rescue CSV::MalformedCSVError => e
      raise TruncatedError.new("an unterminated quoted field: #{e.message}", offset: text.bytesize) if e.message.start_with?("Unclosed quoted field")

      raise MalformedError.new("not valid CSV: #{e.message}")
    end

    def value(field, col, line)
      v = parse(field, col.type)
      return v unless v.nil?

      raise InvalidFieldError.new("#{field.inspect[0, 60]} is not a #{col.type} value", field: "line #{line}, #{col.name}")
    end

    # The value of one CSV field for +type+, or nil when it does not parse.
    def parse(field, type)
      case type
      when "string" then field.to_s
      when "bool" then { "true" => true, "false" => false }[field]
      when "int32", "int64"
        field&.match?(INTEGER) && Table::INT_RANGE[type].cover?(i = Integer(field, 10)) ? i : nil
      when "float64", "float32" then float(field, type)
      when "uuid" then field&.match?(Table::UUID) ? field.downcase : nil
      else
        m = /\A\[(.*)\]\z/m.match(field.to_s) or return nil
        items = m[1].split(",", -1).map { |x| float(x.strip, "float32") }
        items.size == Table.dimensions(type) && items.none?(&:nil?) ? items : nil
      end
    end

    def float(field, type)
      return SPECIALS[field] if SPECIALS.key?(field)
      return nil unless field&.match?(NUMBER)

      v = Float(field, exception: false)
      return nil unless v&.finite? && (type == "float64" || v.abs < Table::F32_OVERFLOW)

      v
    end

    # ---------------------------------------------------------------- encoding
    # The CSV text of +table+ (CRLF line ends; fields quoted as section 15.4 says).
    def encode(table)
      cols = table.columns.map { |c| fields(c) }
      out = +"#{table.columns.map { |c| quote(c.name) }.join(",")}\r\n"
      table.rows.times { |i| out << cols.map { |f| f[i] }.join(",") << "\r\n" }
      out
    end

    def fields(column)
      case column.type
      when "bool", "int32", "int64", "uuid" then column.to_a.map(&:to_s)
      when "string" then column.to_a.map { |s| quote(s) }
      when "float32", "float64" then decimals(column.to_packed, column.type)
      else
        decimals(column.to_packed, "float32").each_slice(column.dimensions).map { |row| quote("[#{row.join(",")}]") }
      end
    end

    def decimals(data, type)
      bits = data.unpack(type == "float32" ? "L<*" : "Q<*")
      data.unpack(type == "float32" ? "e*" : "E*").each_with_index.map do |v, i|
        next v.nan? ? "NaN" : (v.positive? ? "Infinity" : "-Infinity") unless v.finite?

        Convert.shortest_decimal(v, bits[i], type)
      end
    end

    def quote(text)
      text = text.to_s
      return text unless text.empty? || text.match?(/[,"\r\n]/) || text.start_with?(" ", "\uFEFF") || text.end_with?(" ")

      %("#{text.gsub('"', '""')}")
    end
  end
end
