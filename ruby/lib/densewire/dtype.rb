# frozen_string_literal: true

module Densewire
  # Dtypes (SPEC.md section 2) and byte orders (section 4).
  module Dtype
    # name => [item bytes (binary: bytes of packed bits), Protobuf enum value]
    TABLE = {
      "float32" => [4, 1],
      "float16" => [2, 2],
      "bfloat16" => [2, 3],
      "float64" => [8, 4],
      "int8" => [1, 5],
      "uint8" => [1, 6],
      "binary" => [1, 7],
    }.freeze
    NAMES = TABLE.keys.freeze
    FLOATS = %w[float32 float16 bfloat16 float64].freeze
    BY_PROTO = TABLE.to_h { |name, (_, proto)| [proto, name] }.freeze
    BYTEORDERS = %w[little big].freeze

    module_function

    # Bytes of one item (1 for binary, whose items are the packed bytes).
    def item_bytes(dtype)
      TABLE.fetch(dtype)[0]
    end

    def proto_enum(dtype)
      TABLE.fetch(dtype)[1]
    end

    # row_bytes(dtype, d) of SPEC.md section 2.
    def row_bytes(dtype, d)
      dtype == "binary" ? (d + 7) / 8 : d * item_bytes(dtype)
    end

    # Items per row: d, or ceil(d / 8) packed bytes for binary.
    def row_items(dtype, d)
      dtype == "binary" ? (d + 7) / 8 : d
    end

    # The dtype name as a String, or UnknownDtypeError. Symbols are accepted from Ruby callers; any
    # other string (Float32, fp16) is unknown: names are exact and lowercase.
    def check!(dtype, field: "dtype")
      name = dtype.is_a?(Symbol) ? dtype.to_s : dtype
      raise InvalidFieldError.new("dtype must be a string, got #{dtype.inspect}", field: field) unless name.is_a?(String)
      raise UnknownDtypeError.new("unknown dtype #{name.inspect} (known: #{NAMES.join(", ")})", field: field) unless TABLE.key?(name)

      name
    end

    # SPEC.md 20: a tensor body says no kind. +fields+ (the parsed body, its headers or metadata) must
    # not have +key+, whatever its value.
    def check_no_kind!(fields, key)
      return unless fields.key?(key)

      raise InvalidFieldError.new("a tensor body says no kind, this one says #{fields[key].inspect}: decode it as that kind",
                                  field: key)
    end

    def check_byteorder!(byteorder, field: "byteorder")
      name = byteorder.is_a?(Symbol) ? byteorder.to_s : byteorder
      unless BYTEORDERS.include?(name)
        raise InvalidFieldError.new("byteorder must be \"little\" or \"big\", got #{byteorder.inspect}", field: field)
      end

      name
    end

    # [n, d] as two non-negative Integers, or InvalidFieldError.
    def check_shape!(shape, field: "shape")
      unless shape.is_a?(Array) && shape.size == 2 && shape.all? { |x| x.is_a?(Integer) && x >= 0 }
        raise InvalidFieldError.new("shape must be two non-negative integers [n, d], got #{shape.inspect}", field: field)
      end

      shape.dup.freeze
    end

    # LengthMismatchError unless +actual+ bytes are the +expected+ n * row_bytes; the offset is the
    # first byte missing or in excess (SPEC.md section 5).
    def check_length!(actual, expected, field: nil)
      return if actual == expected

      raise LengthMismatchError.new("#{actual} bytes, the shape needs #{expected}", offset: [actual, expected].min, field: field)
    end

    # Reverses the bytes of every item (little <-> big endian); one-byte dtypes are unchanged.
    def swap(data, dtype)
      case item_bytes(dtype)
      when 2 then data.unpack("v*").pack("n*")
      when 4 then data.unpack("V*").pack("N*")
      when 8 then data.unpack("Q<*").pack("Q>*")
      else data
      end
    end
  end
end
