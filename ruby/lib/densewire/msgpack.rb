# frozen_string_literal: true

module Densewire
  # The MessagePack body of SPEC.md section 8 (application/vnd.msgpack): one map with model, dtype,
  # shape, data (bin, little-endian), usage and quantization (the id of int8/uint8 rows' ranges). Uses the msgpack gem (Debian: ruby-msgpack), loaded
  # on first use.
  module Msgpack
    KEY_ORDER = %w[model dtype shape data usage quantization].freeze

    module_function

    # Loads the msgpack gem, or raises a LoadError that says how to install it.
    def library
      require "msgpack"
      ::MessagePack
    rescue LoadError => e
      raise LoadError, "densewire's MessagePack format needs the msgpack gem: apt-get install ruby-msgpack " \
                       "(or gem install msgpack) (#{e.message})"
    end

    # The body for +tensor+ (a Tensor, or Embeddings whose model and usage are used). Smallest
    # representations and the spec's key order make it byte-exact.
    def encode(tensor, model: nil, usage: nil, quantization: nil)
      if tensor.is_a?(Embeddings)
        model ||= tensor.model
        usage ||= tensor.usage
        quantization ||= tensor.quantization
        tensor = tensor.tensor
      end
      quantization = Quantization.check!(quantization)
      map = {}
      map["model"] = utf8(model.to_s) if model
      map["dtype"] = utf8(tensor.dtype)
      map["shape"] = [tensor.n, tensor.d]
      map["data"] = tensor.data # binary encoding: written as bin
      if usage
        usage = usage.to_h
        map["usage"] = { "prompt_tokens" => Integer(usage["prompt_tokens"] || usage[:prompt_tokens] || 0),
                         "total_tokens" => Integer(usage["total_tokens"] || usage[:total_tokens] || 0) }
      end
      map["quantization"] = utf8(quantization) if quantization
      library.pack(map)
    end

    # Decodes a body into Embeddings (model and usage nil when absent). Keys may come in any order,
    # integers in any width; unknown keys are skipped.
    def decode(body)
      fields = read_fields(body)
      Dtype.check_no_kind!(fields, "kind")
      embeddings_of(fields)
    end

    # The body's map (str keys) with section 8's structural errors: also read by Densewire::Kinds.
    def read_fields(body)
      lib = library
      body = body.to_s.b
      size = body.bytesize
      raise TruncatedError.new("the body is empty", offset: 0) if size.zero?
      raise MalformedError.new("the body is not a map", offset: 0) unless map_marker?(body.getbyte(0))

      # Structure and every declared length are checked before the gem decodes anything: the gem
      # allocates what a header claims, so a few bytes could otherwise ask for gigabytes.
      stop = Scanner.new(body).skip(0, 0)
      raise MalformedError.new("#{size - stop} bytes follow the map", offset: stop) if stop < size

      unpacker = lib::Unpacker.new(allow_unknown_ext: true)
      unpacker.feed(body)
      pos = -> { size - unpacker.buffer.size }
      fields = {}
      count = guard(lib, size, 0) { unpacker.read_map_header }
      count.times do
        at = pos.call
        key = guard(lib, size, at) { unpacker.read }
        raise MalformedError.new("map key is not a str: #{key.inspect[0, 40]}", offset: at) unless str?(key)

        value_at = pos.call
        fields[key] = guard(lib, size, value_at) { unpacker.read }
      end
      raise MalformedError.new("#{size - pos.call} bytes follow the map", offset: pos.call) unless unpacker.buffer.size.zero?

      fields
    end

    def guard(lib, size, at)
      yield
    rescue EOFError
      raise TruncatedError.new("the body ends early", offset: size)
    rescue lib::UnexpectedTypeError
      raise MalformedError.new("the body is not a map", offset: at)
    rescue lib::MalformedFormatError, lib::StackError, lib::UnknownExtTypeError => e
      raise MalformedError.new("invalid MessagePack: #{e.message}", offset: at)
    end

    def map_marker?(byte)
      (0x80..0x8f).cover?(byte) || byte == 0xde || byte == 0xdf
    end

    # Walks one MessagePack value without building it: its end offset, or TruncatedError (the body
    # ends first, offset = body length) / MalformedError (offset of the bad byte).
    class Scanner
      MAX_DEPTH = 64
      # marker => [bytes of the length field, bytes after the length (ext type)] for str/bin/ext
      SIZED = { 0xc4 => [1, 0], 0xc5 => [2, 0], 0xc6 => [4, 0], 0xd9 => [1, 0], 0xda => [2, 0], 0xdb => [4, 0],
                0xc7 => [1, 1], 0xc8 => [2, 1], 0xc9 => [4, 1] }.freeze
      FIXED = { 0xca => 4, 0xcb => 8, 0xcc => 1, 0xcd => 2, 0xce => 4, 0xcf => 8, 0xd0 => 1, 0xd1 => 2, 0xd2 => 4,
                0xd3 => 8, 0xd4 => 2, 0xd5 => 3, 0xd6 => 5, 0xd7 => 9, 0xd8 => 17 }.freeze
      UINT = { 1 => "C", 2 => "n", 4 => "N" }.freeze

      def initialize(body)
        @body = body
        @size = body.bytesize
      end

      def skip(pos, depth)
        need(pos + 1)
        t = @body.getbyte(pos)
        pos += 1
        case t
        when 0x00..0x7f, 0xe0..0xff, 0xc0, 0xc2, 0xc3 then pos
        when 0x80..0x8f then items(pos, 2 * (t & 0x0f), depth, pos - 1)
        when 0x90..0x9f then items(pos, t & 0x0f, depth, pos - 1)
        when 0xa0..0xbf then need(pos + (t & 0x1f))
        when 0xdc, 0xdd, 0xde, 0xdf
          width = t <= 0xdd ? (t == 0xdc ? 2 : 4) : (t == 0xde ? 2 : 4)
          count = uint(pos, width) * (t >= 0xde ? 2 : 1)
          items(pos + width, count, depth, pos - 1)
        when 0xc1 then raise MalformedError.new("0xc1 is never used in MessagePack", offset: pos - 1)
        else
          return need(pos + FIXED[t]) if FIXED.key?(t)

          width, extra = SIZED.fetch(t)
          need(pos + width + extra + uint(pos, width))
        end
      end

      private

      def items(pos, count, depth, at)
        raise MalformedError.new("nested deeper than #{MAX_DEPTH}", offset: at) if depth >= MAX_DEPTH

        need(pos + count) # every item takes at least one byte
        count.times { pos = skip(pos, depth + 1) }
        pos
      end

      def uint(pos, width)
        need(pos + width)
        @body.byteslice(pos, width).unpack1(UINT[width])
      end

      def need(upto)
        raise TruncatedError.new("the body ends early", offset: @size) if upto > @size

        upto
      end
    end

    def embeddings_of(fields)
      dtype = fields["dtype"]
      raise InvalidFieldError.new("missing or not a str", field: "dtype") unless str?(dtype)

      dtype = Dtype.check!(dtype)
      shape = fields["shape"]
      unless shape.is_a?(Array) && shape.size == 2 && shape.all? { |x| x.is_a?(Integer) && x >= 0 }
        raise InvalidFieldError.new("missing or not two non-negative integers", field: "shape")
      end

      data = fields["data"]
      raise InvalidFieldError.new("missing or not bin", field: "data") unless data.is_a?(String) && data.encoding == Encoding::BINARY

      Dtype.check_length!(data.bytesize, shape[0] * Dtype.row_bytes(dtype, shape[1]), field: "data")
      model = fields["model"]
      quantization = fields["quantization"]
      raise InvalidFieldError.new("not a str", field: "quantization") if fields.key?("quantization") && !str?(quantization)

      Embeddings.new(Tensor.new(data, dtype: dtype, shape: shape), model: str?(model) ? model : nil,
                                                                   usage: Usage.parse(fields["usage"]),
                                                                   quantization: quantization)
    end


    # str (not bin): the gem decodes str as UTF-8 and bin as binary.
    def str?(value)
      value.is_a?(String) && value.encoding != Encoding::BINARY
    end

    def utf8(text)
      text.encoding == Encoding::UTF_8 ? text : text.dup.force_encoding(Encoding::UTF_8)
    end
  end
end
