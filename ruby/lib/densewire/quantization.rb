# frozen_string_literal: true

require "digest"
require "json"

module Densewire
  # Quantized embeddings: int8 and uint8 rows with per-dimension ranges a server publishes.
  #
  # A server answering +dtype: "int8"+ or +"uint8"+ quantizes dimension j of each float32 vector
  # against [lower[j], upper[j]], calibrated once per model; every format names the ranges by a
  # quantization id (JSON "quantization", the raw header Densewire-Quantization, MessagePack
  # "quantization", Protobuf EmbeddingsResponse.quantization, Arrow metadata densewire.quantization),
  # which the decoders put in Embeddings#quantization; GET /v1/quantization/{id} answers the ranges.
  #
  # The rule, the same in every implementation: binary64 arithmetic (Ruby Floats) on the float32
  # values widened exactly; step = (upper - lower) / 255;
  # - quantize: u = floor((x - lower) / step) clamped to 0..255; NaN gives 0; when step is 0, u = 255
  #   if x > lower else 0. A uint8 item is u, an int8 item u - 128.
  # - dequantize: float32(lower + (u + 0.5) * step), ties to even; lower itself when step is 0.
  #
  #   q = client.quantization(codes.quantization)          # or Quantization.from_object(hash)
  #   floats = q.dequantize(codes)                         # Embeddings of float32
  #   floats = Densewire::Quantization.dequantize(codes, lower, upper)
  class Quantization
    METHOD = "minmax-per-dimension"
    ID = /\A[0-9a-f]{16}\z/.freeze
    DTYPES = %w[int8 uint8].freeze

    # The calibration set the ranges were measured on.
    Calibration = Struct.new(:name, :texts, :sha256, keyword_init: true)

    attr_reader :id, :method_name, :dimensions, :lower, :upper, :calibration, :model

    # +method_name+ is the object's "method" (Object#method keeps its meaning).
    # +lower+ and +upper+: Arrays of d Floats (float32 values) or d little-endian float32 values packed
    # in a binary String. +id+: checked against the ranges when given, computed when not.
    def initialize(lower:, upper:, id: nil, method: METHOD, calibration: nil, model: nil)
      @lower, @upper = Quantization.ranges(lower, upper)
      @dimensions = @lower.size
      Quantization.send(:check_ranges!, @lower, @upper, @dimensions)
      actual = Quantization.id(@lower, @upper)
      raise InvalidFieldError.new("the ranges have id #{actual}, not #{id}", field: "id") if id && id != actual

      @id = actual
      @method_name = method
      @calibration = calibration
      @model = model
      freeze
    end

    class << self
      # The quantization object a server publishes (GET /v1/quantization/{id}, or the "quantization" of
      # a GET /v1/models item), as a Hash or JSON text, checked as SPEC.md section 17.6 says, the first
      # failure being the error: the keys id, method ("minmax-per-dimension"), dimensions, lower and
      # upper are there with their types (InvalidFieldError on the key); lower then upper are strict
      # Base64 of 4 * dimensions bytes (InvalidBase64Error, LengthMismatchError); the ranges are finite
      # with lower <= upper (InvalidFieldError on lower[j] / upper[j]); id is their id (on "id").
      # +prefix+ goes before every field name ("data[0].quantization." for a models listing).
      def from_object(doc, prefix: "")
        doc = parse_json(doc) if doc.is_a?(String)
        raise MalformedError.new("the quantization object must be a JSON object, got #{doc.class}") unless doc.is_a?(Hash)

        str = lambda do |key|
          v = doc[key]
          raise InvalidFieldError.new(v.nil? ? "missing" : "must be a string, got #{v.inspect[0, 40]}", field: prefix + key) unless v.is_a?(String)

          v
        end
        id = str.call("id")
        method = str.call("method")
        raise InvalidFieldError.new("unknown method #{method.inspect} (this library knows #{METHOD})", field: "#{prefix}method") unless method == METHOD

        d = doc["dimensions"]
        raise InvalidFieldError.new("must be a non-negative integer, got #{d.inspect}", field: "#{prefix}dimensions") unless d.is_a?(Integer) && d >= 0

        texts = { "lower" => str.call("lower"), "upper" => str.call("upper") }
        lower, upper = texts.map do |key, text|
          bytes = Base64.decode_bytes(text, field: prefix + key)
          Dtype.check_length!(bytes.bytesize, 4 * d, field: prefix + key)
          bytes.unpack("e*")
        end
        check_ranges!(lower, upper, d, prefix)
        actual = id(lower, upper)
        raise InvalidFieldError.new("the ranges have id #{actual}, not #{id.inspect}", field: "#{prefix}id") unless actual == id

        cal = doc["calibration"]
        calibration = (Calibration.new(name: cal["name"], texts: cal["texts"], sha256: cal["sha256"]) if cal.is_a?(Hash))
        new(lower: lower, upper: upper, id: id, method: method, calibration: calibration, model: doc["model"].is_a?(String) ? doc["model"] : nil)
      end

      # The quantization id of ranges: the first 16 hex digits of sha256(lower as float32 LE bytes ||
      # upper likewise || d in decimal ASCII).
      def id(lower, upper)
        lo, hi = ranges(lower, upper)
        raise ShapeMismatchError.new("lower has #{lo.size} values, upper #{hi.size}", field: "upper") unless lo.size == hi.size

        Digest::SHA256.hexdigest(Convert.pack_float32(lo) + Convert.pack_float32(hi) + lo.size.to_s)[0, 16]
      end

      # Dequantizes int8 or uint8 codes (a Tensor, or Embeddings whose model and usage are kept) to
      # float32 with the ranges they were quantized with. Errors: InvalidFieldError on dtype for other
      # dtypes, ShapeMismatchError when lower/upper do not have d values, InvalidFieldError naming
      # lower[j] (not finite) or upper[j] (not finite, or below lower[j]) for the first such j.
      def dequantize(codes, lower, upper)
        tensor = codes.is_a?(Embeddings) ? codes.tensor : codes
        unless DTYPES.include?(tensor.dtype)
          raise InvalidFieldError.new("dequantize takes int8 or uint8 codes, got #{tensor.dtype}", field: "dtype")
        end

        n, d = tensor.shape
        lo, hi = ranges(lower, upper)
        check_ranges!(lo, hi, d)
        step = steps(lo, hi)
        # an int8 item + 128 is its byte with the top bit flipped: read every code as a uint8 byte
        flip = tensor.dtype == "int8" ? 0x80 : 0
        values = Array.new(n * d)
        codes_u8 = tensor.data.unpack("C*")
        k = 0
        n.times do
          j = 0
          while j < d
            st = step[j]
            values[k] = st.zero? ? lo[j] : lo[j] + ((codes_u8[k] ^ flip) + 0.5) * st
            j += 1
            k += 1
          end
        end
        out = Tensor.new(Convert.pack_float32(values), dtype: "float32", shape: [n, d])
        codes.is_a?(Embeddings) ? Embeddings.new(out, model: codes.model, usage: codes.usage) : out
      end

      # Quantizes float32 rows (a Tensor) to int8 or uint8 codes by the spec's rule, what a densewire
      # server does. Errors: InvalidFieldError on dtype, and the range errors of +dequantize+.
      def quantize(tensor, lower, upper, dtype:)
        tensor = tensor.tensor if tensor.is_a?(Embeddings)
        raise InvalidFieldError.new("must be \"int8\" or \"uint8\", got #{dtype.inspect}", field: "dtype") unless DTYPES.include?(dtype.to_s)
        unless tensor.dtype == "float32"
          raise InvalidFieldError.new("quantize takes float32 rows, got #{tensor.dtype} (convert it first)", field: "dtype")
        end

        n, d = tensor.shape
        lo, hi = ranges(lower, upper)
        check_ranges!(lo, hi, d)
        step = steps(lo, hi)
        x = tensor.data.unpack("e*")
        codes = Array.new(n * d)
        k = 0
        n.times do
          j = 0
          while j < d
            codes[k] = code(x[k], lo[j], step[j])
            j += 1
            k += 1
          end
        end
        if dtype.to_s == "int8"
          Tensor.new(codes.map! { |u| u - 128 }.pack("c*"), dtype: "int8", shape: [n, d])
        else
          Tensor.new(codes.pack("C*"), dtype: "uint8", shape: [n, d])
        end
      end

      # Packed sign bits (a binary Tensor, or its packed bytes as a String) as Cohere's and
      # sentence-transformers' "binary": each byte as an int8, byte - 128 (SPEC.md section 17.1; the
      # bytes themselves are their "ubinary"). Returns an Array of Integers.
      def cohere_binary(packed)
        packed = packed.tensor if packed.is_a?(Embeddings)
        if packed.is_a?(Tensor)
          raise InvalidFieldError.new("needs a binary tensor, not #{packed.dtype}", field: "dtype") unless packed.dtype == "binary"

          packed = packed.data
        end
        packed.b.unpack("C*").map! { |b| b - 128 }
      end

      # Cohere's "binary" int8 values (byte - 128) back to the packed bytes, a binary String.
      def from_cohere_binary(values)
        values.each_with_index.map do |v, i|
          raise InvalidFieldError.new("Cohere binary values are -128..127, got #{v.inspect}", field: "binary[#{i}]") unless v.is_a?(Integer) && v.between?(-128, 127)

          v + 128
        end.pack("C*")
      end

      # [lower, upper] as Arrays of Floats (float32 values); each may be an Array or packed LE bytes.
      def ranges(lower, upper)
        [float32_values(lower, "lower"), float32_values(upper, "upper")]
      end

      # Checks a quantization id read by a decoder (+field+ names where): nil when absent, else it
      # must be a String (InvalidFieldError).
      def read_id(value, field)
        return nil if value.nil?
        raise InvalidFieldError.new("must be a string, got #{value.inspect[0, 40]}", field: field) unless value.is_a?(String)

        value
      end

      # What an encoder writes: +id+ when given (a String), whatever the dtype (SPEC.md section 17.5).
      def check!(id)
        return nil if id.nil?
        raise InvalidFieldError.new("must be a string, got #{id.class}", field: "quantization") unless id.is_a?(String)

        id
      end

      private

      def code(v, lo, st)
        return v > lo ? 255 : 0 if st.zero? # NaN compares false: 0

        q = (v - lo) / st
        return 0 if q.nan? || q < 0
        return 255 if q >= 255

        q.floor
      end

      def steps(lo, hi)
        lo.each_index.map { |j| (hi[j] - lo[j]) / 255.0 }
      end

      def float32_values(v, name)
        case v
        when String
          bytes = v.b
          Dtype.check_length!(bytes.bytesize, bytes.bytesize - bytes.bytesize % 4, field: name)
          bytes.unpack("e*")
        when Array
          # round to float32 (exactly, SPEC.md section 3.3), then back to Floats
          Convert.pack_float32(v.map { |x| Float(x) }).unpack("e*")
        else raise InvalidFieldError.new("must be an Array of numbers or packed float32 bytes, got #{v.class}", field: name)
        end
      rescue TypeError, ArgumentError
        raise InvalidFieldError.new("must hold numbers only", field: name)
      end

      def check_ranges!(lo, hi, d, prefix = "")
        [["lower", lo], ["upper", hi]].each do |name, values|
          raise ShapeMismatchError.new("#{name} has #{values.size} values, the rows have #{d} dimensions", field: prefix + name) unless values.size == d
        end
        d.times do |j|
          raise InvalidFieldError.new("must be finite, got #{lo[j]}", field: "#{prefix}lower[#{j}]") unless lo[j].finite?
          raise InvalidFieldError.new("must be finite, got #{hi[j]}", field: "#{prefix}upper[#{j}]") unless hi[j].finite?
          raise InvalidFieldError.new("#{hi[j]} is below lower[#{j}] = #{lo[j]}", field: "#{prefix}upper[#{j}]") if lo[j] > hi[j]
        end
      end

      def parse_json(text)
        JSON.parse(text)
      rescue JSON::ParserError => e
        raise MalformedError.new("not valid JSON: #{e.message[0, 120]}")
      end
    end

    # Dequantizes +codes+ (Tensor or Embeddings of int8/uint8) with these ranges; see ::dequantize.
    def dequantize(codes)
      Quantization.dequantize(codes, @lower, @upper)
    end

    # Quantizes float32 rows with these ranges; see ::quantize.
    def quantize(tensor, dtype:)
      Quantization.quantize(tensor, @lower, @upper, dtype: dtype)
    end

    # The object as a server publishes it (Base64 ranges), keys in SPEC.md order.
    def to_h
      h = { "object" => "quantization", "id" => @id }
      h["model"] = @model if @model
      h["method"] = @method_name
      h["calibration"] = @calibration.to_h.transform_keys(&:to_s) if @calibration
      h.merge("dimensions" => @dimensions, "lower" => [Convert.pack_float32(@lower)].pack("m0"),
              "upper" => [Convert.pack_float32(@upper)].pack("m0"))
    end

    def ==(other)
      other.is_a?(Quantization) && other.id == @id
    end
    alias eql? ==

    def hash
      @id.hash
    end

    def inspect
      "#<Densewire::Quantization #{@id} #{@method_name} d=#{@dimensions}>"
    end
  end
end
