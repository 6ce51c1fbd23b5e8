# frozen_string_literal: true

module Densewire
  # A row-major (n, d) matrix of one dtype (SPEC.md section 1). The bytes are held as one frozen
  # little-endian binary String (+data+), so a tensor passes from one format to another without ever
  # materialising Ruby numbers; +to_a+ / +rows+ make them when asked.
  class Tensor
    attr_reader :dtype, :shape, :data

    # +data+: the tensor's bytes in +byteorder+; its length must be n * row_bytes(dtype, d).
    def initialize(data, dtype: "float32", shape:, byteorder: "little")
      @dtype = Dtype.check!(dtype)
      @shape = Dtype.check_shape!(shape)
      byteorder = Dtype.check_byteorder!(byteorder)
      raise InvalidFieldError.new("data must be a String of bytes", field: "data") unless data.is_a?(String)

      data = data.b
      expected = @shape[0] * Dtype.row_bytes(@dtype, @shape[1])
      if data.bytesize != expected
        raise LengthMismatchError.new("#{data.bytesize} bytes of data, shape #{@shape.inspect} #{@dtype} needs #{expected}",
                                      offset: [data.bytesize, expected].min, field: "data")
      end
      data = Dtype.swap(data, @dtype) if byteorder == "big"
      @data = data.freeze
    end

    class << self
      # A tensor from Ruby numbers: an Array of rows (Arrays of equal length), or a flat Array with
      # +shape+. Float dtypes round by SPEC.md section 3 (ties to even; NaN canonical). int8 and
      # uint8 take Integers in range. binary takes numbers and packs bit = (value > 0) per section 3.4.
      def from_values(values, dtype: "float32", shape: nil)
        dtype = Dtype.check!(dtype)
        raise InvalidFieldError.new("values must be an Array", field: "values") unless values.is_a?(Array)

        if shape.nil?
          rows = values
          d = rows.empty? ? 0 : row_size(rows[0], 0)
          rows.each_with_index do |row, i|
            next if row_size(row, i) == d

            raise ShapeMismatchError.new("row #{i} has #{row.size} values, row 0 has #{d}", field: "values[#{i}]")
          end
          shape = [rows.size, d]
          flat = rows.flatten(1)
        else
          shape = Dtype.check_shape!(shape)
          flat = values
          n_values = shape[0] * shape[1]
          if flat.size != n_values
            raise ShapeMismatchError.new("#{flat.size} values for shape #{shape.inspect}", field: "values")
          end
        end
        new(pack_values(flat, dtype, shape), dtype: dtype, shape: shape)
      end

      # A tensor from the items' bit patterns as Integers (for binary: the packed bytes).
      def from_bits(bits, dtype:, shape:)
        dtype = Dtype.check!(dtype)
        directive = { 1 => "C*", 2 => "S<*", 4 => "L<*", 8 => "Q<*" }[Dtype.item_bytes(dtype)]
        new(bits.pack(directive), dtype: dtype, shape: shape)
      end

      private

      def row_size(row, i)
        raise InvalidFieldError.new("row #{i} is not an Array", field: "values[#{i}]") unless row.is_a?(Array)

        row.size
      end

      def pack_values(flat, dtype, shape)
        case dtype
        when "binary"
          d = shape[1]
          return "".b if d.zero?

          flat.each_slice(d).map { |row| Convert.pack_bits(row) }.join.b
        when "int8", "uint8"
          lo, hi = dtype == "int8" ? [-128, 127] : [0, 255]
          flat.each_with_index do |v, j|
            next if v.is_a?(Integer) && v.between?(lo, hi)

            raise InvalidFieldError.new("#{v.inspect} is not a #{dtype} (#{lo}..#{hi})", field: "values[#{j}]")
          end
          flat.pack(dtype == "int8" ? "c*" : "C*")
        else
          Convert.pack_floats(flat, dtype)
        end
      rescue TypeError, ArgumentError => e
        bad = flat.index { |v| !v.is_a?(Numeric) }
        raise InvalidFieldError.new("not a number: #{bad ? flat[bad].inspect : e.message}", field: bad ? "values[#{bad}]" : "values")
      end
    end

    def n
      @shape[0]
    end

    def d
      @shape[1]
    end

    def row_bytes
      Dtype.row_bytes(@dtype, d)
    end

    # The bytes in a byte order ("little" is +data+ itself).
    def bytes(byteorder = "little")
      Dtype.check_byteorder!(byteorder) == "big" ? Dtype.swap(@data, @dtype) : @data
    end

    # All items, row-major, as Ruby numbers: Floats for float dtypes (float16 and bfloat16 widened
    # exactly), Integers for int8/uint8, and the packed bytes (0-255) for binary.
    def to_a
      Convert.unpack(@data, @dtype)
    end

    # The rows as Arrays of Ruby numbers (see +to_a+).
    def rows
      width = Dtype.row_items(@dtype, d)
      return Array.new(n) { [] } if width.zero?

      flat = to_a
      Array.new(n) { |i| flat[i * width, width] } # slices share the flat array's memory
    end

    # Each row's little-endian bytes as a binary String: what pgvector's binary COPY, numpy's
    # frombuffer or any other byte consumer takes, without making a Ruby number per item.
    def packed_rows(byteorder = "little")
      rb = row_bytes
      src = bytes(byteorder)
      Array.new(n) { |i| src.byteslice(i * rb, rb) }
    end

    # For binary: each row's d bits as 0/1 Integers (MSB first, padding dropped).
    def bit_rows
      raise InvalidFieldError.new("bit_rows needs dtype binary, not #{@dtype}", field: "dtype") unless @dtype == "binary"

      packed_rows.map { |r| r.unpack1("B*")[0, d].each_char.map(&:to_i) }
    end

    # The items' bit patterns as Integers, row-major (binary: the packed bytes).
    def bits
      @data.unpack({ 1 => "C*", 2 => "S<*", 4 => "L<*", 8 => "Q<*" }[Dtype.item_bytes(@dtype)])
    end

    # This tensor in another dtype (SPEC.md section 3): float32 to float16 / bfloat16, float64 to
    # float32 / float16 / bfloat16, any float dtype to binary; float16 / bfloat16 to float32 or
    # float64 and float32 to float64 widen exactly.
    def convert(to)
      to = Dtype.check!(to)
      return self if to == @dtype

      return Tensor.from_values(to_a, dtype: "binary", shape: @shape) if to == "binary" && Dtype::FLOATS.include?(@dtype)

      Tensor.new(convert_floats(to), dtype: to, shape: @shape)
    end

    def ==(other)
      other.is_a?(Tensor) && other.dtype == @dtype && other.shape == @shape && other.data == @data
    end
    alias eql? ==

    def hash
      [@dtype, @shape, @data].hash
    end

    def inspect
      "#<Densewire::Tensor #{@dtype} #{@shape[0]}x#{@shape[1]} (#{@data.bytesize} bytes)>"
    end

    private

    def convert_floats(to)
      case [@dtype, to]
      when %w[float32 float16] then bits.map! { |b| Convert.f32_to_f16(b) }.pack("S<*")
      when %w[float32 bfloat16] then bits.map! { |b| Convert.f32_to_bf16(b) }.pack("S<*")
      when %w[float64 float32]
        values = to_a
        if values.sum.finite? && (values.empty? || (values.max <= Convert::FLT_MAX && values.min >= -Convert::FLT_MAX))
          values.pack("e*")
        else
          bits.map! { |b| Convert.f64_to_f32(b) }.pack("L<*")
        end
      when %w[float64 float16] then bits.map! { |b| Convert.round_f64_bits(b, 5, 10) }.pack("S<*")
      when %w[float64 bfloat16] then bits.map! { |b| Convert.round_f64_bits(b, 8, 7) }.pack("S<*")
      when %w[float16 float32], %w[bfloat16 float32], %w[float32 float64], %w[float16 float64], %w[bfloat16 float64]
        widen(to) # exact, NaN payloads included
      else
        raise InvalidFieldError.new("cannot convert #{@dtype} to #{to}", field: "dtype")
      end
    end

    def widen(to)
      directive = to == "float64" ? "Q<*" : "L<*"
      bits.map! { |b| Convert.widen_bits(b, @dtype, to) }.pack(directive)
    end
  end
end
