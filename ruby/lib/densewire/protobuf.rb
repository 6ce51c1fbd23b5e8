# frozen_string_literal: true

module Densewire
  # The Protobuf bodies of SPEC.md section 9 (application/protobuf), messages densewire.v1.Tensor and
  # densewire.v1.EmbeddingsResponse of proto/densewire/v1/tensor.proto.
  #
  # The wire reader and writer here are hand-written (no gem needed): the official Ruby runtime
  # (google-protobuf) parses a known field with the wrong wire type as an unknown field and reports
  # no offsets, while the spec makes that a +malformed+ error at the field's tag. The writer follows
  # the proto3 serializer's rules and its output is tested byte for byte against google-protobuf's.
  # Users of google-protobuf get the generated classes from +messages+ / +to_message+ / +from_message+.
  module Protobuf
    MESSAGES = %w[Tensor EmbeddingsResponse].freeze

    module_function

    # Body of a Tensor message (+message: "Tensor"+) or an EmbeddingsResponse (+model+, +usage+,
    # +quantization+: the id of int8/uint8 rows' ranges).
    # +tensor+ may be Embeddings, whose model and usage are then used.
    def encode(tensor, message: "Tensor", model: nil, usage: nil, quantization: nil)
      if tensor.is_a?(Embeddings)
        model ||= tensor.model
        usage ||= tensor.usage
        quantization ||= tensor.quantization
        tensor = tensor.tensor
      end
      quantization = Quantization.check!(quantization)
      case message.to_s
      when "Tensor" then tensor_bytes(tensor) # a Tensor has no model, usage or quantization
      when "EmbeddingsResponse"
        out = +"".b
        model = model.to_s.b
        out << field_bytes(1, model) unless model.empty?
        out << field_bytes(2, tensor_bytes(tensor))
        if usage
          usage = usage.to_h
          prompt = Integer(usage["prompt_tokens"] || usage[:prompt_tokens] || 0)
          total = Integer(usage["total_tokens"] || usage[:total_tokens] || 0)
          u = +"".b
          u << varint(1 << 3) << varint(prompt) unless prompt.zero?
          u << varint(2 << 3) << varint(total) unless total.zero?
          out << field_bytes(3, u)
        end
        out << field_bytes(4, quantization.b) if quantization && !quantization.empty?
        out
      else raise ArgumentError, "message must be one of #{MESSAGES.join(", ")}"
      end
    end

    # Decodes a body of +message+ ("Tensor" or "EmbeddingsResponse") into Embeddings.
    def decode(body, message: "Tensor")
      body = body.to_s.b
      case message.to_s
      when "Tensor" then Embeddings.new(read_tensor(body, 0, body.bytesize, ""))
      when "EmbeddingsResponse" then read_response(body)
      else raise ArgumentError, "message must be one of #{MESSAGES.join(", ")}"
      end
    end

    # ---------------------------------------------------------------- writer
    def tensor_bytes(tensor)
      shape = varint(tensor.n) << varint(tensor.d)
      out = varint(1 << 3) << varint(Dtype.proto_enum(tensor.dtype)) << field_bytes(2, shape)
      out << field_bytes(3, tensor.data) unless tensor.data.empty?
      out
    end

    def field_bytes(number, payload)
      varint((number << 3) | 2) << varint(payload.bytesize) << payload
    end

    def varint(value)
      out = +"".b
      loop do
        byte = value & 0x7F
        value >>= 7
        out << (value.zero? ? byte : byte | 0x80).chr
        return out if value.zero?
      end
    end

    # ---------------------------------------------------------------- reader
    # Unknown groups nested deeper than this are malformed ("groups nested too deeply").
    GROUP_DEPTH_LIMIT = 64

    # A cursor over body[pos...limit]; +limit+ is the end of the enclosing message.
    # +top+ is true for the body itself: running off its end means the body was cut short.
    Reader = Struct.new(:body, :pos, :limit, :top) do
      def more?
        pos < limit
      end

      # [field number, wire type, offset of the tag] where a field is expected: an end-group tag
      # (wire type 4) there has no start group to close.
      def tag
        number, wire, at = any_tag
        raise MalformedError.new("end-group tag without a matching start", offset: at) if wire == 4

        [number, wire, at]
      end

      # [field number, wire type, offset of the tag], any of wire types 0 to 5.
      def any_tag
        at = pos
        key = varint
        number = key >> 3
        wire = key & 7
        raise MalformedError.new("field number 0", offset: at) if number.zero?
        raise MalformedError.new("invalid wire type #{wire}", offset: at) if wire > 5

        [number, wire, at]
      end

      def varint
        at = pos
        value = 0
        shift = 0
        loop do
          ran_out(at) if pos >= limit
          byte = body.getbyte(pos)
          self.pos += 1
          value |= (byte & 0x7F) << shift
          return value if byte < 0x80

          shift += 7
          raise MalformedError.new("varint longer than 10 bytes", offset: at) if shift >= 70
        end
      end

      def bytes(at)
        len = varint
        if pos + len > limit
          raise TruncatedError.new("the body ends inside a field", offset: body.bytesize) if top

          raise MalformedError.new("length #{len} runs past the end of the enclosing message", offset: at)
        end

        out = body.byteslice(pos, len)
        self.pos += len
        out
      end

      # Skips the value of unknown field +number+ (tag at +at+). A group (deprecated wire type 3) is
      # skipped up to the end-group tag of the same number, its fields (nested groups included, at
      # most GROUP_DEPTH_LIMIT deep) skipped alike; another end-group tag is malformed at that tag.
      def skip(wire, at, number, depth = 0)
        case wire
        when 0 then varint
        when 1, 5
          width = wire == 1 ? 8 : 4
          ran_out(at) if pos + width > limit
          self.pos += width
        when 2 then bytes(at)
        when 3 then skip_group(number, at, depth)
        else raise MalformedError.new("unsupported wire type #{wire}", offset: at)
        end
      end

      def skip_group(number, at, depth)
        raise MalformedError.new("groups nested too deeply", offset: at) if depth >= GROUP_DEPTH_LIMIT

        loop do
          ran_out(at) unless more?
          inner_number, inner_wire, inner_at = any_tag
          if inner_wire == 4
            return if inner_number == number

            raise MalformedError.new("end-group tag #{inner_number} does not match start group #{number}", offset: inner_at)
          end
          skip(inner_wire, inner_at, inner_number, depth + 1)
        end
      end

      # A read ran past +limit+: the body ended early (truncated) or a submessage did (malformed).
      def ran_out(at)
        raise TruncatedError.new("the body ends early", offset: body.bytesize) if top

        raise MalformedError.new("a value runs past the end of its enclosing message", offset: at)
      end
    end

    def wrong_wire(name, at)
      raise MalformedError.new("field #{name} has the wrong wire type", offset: at)
    end

    def read_tensor(body, start, limit, prefix)
      r = Reader.new(body, start, limit, prefix.empty?)
      dtype = 0
      shape = []
      data = "".b
      while r.more?
        number, wire, at = r.tag
        case number
        when 1
          wrong_wire("#{prefix}dtype", at) unless wire.zero?
          dtype = r.varint
        when 2
          if wire == 2
            payload = r.bytes(at)
            packed = Reader.new(body, r.pos - payload.bytesize, r.pos, false)
            begin
              shape << packed.varint while packed.more?
            rescue MalformedError
              # an entry running past the end of the packed field: malformed at the field's tag (SPEC.md section 9)
              raise MalformedError.new("a packed shape entry runs past the end of its field", offset: at)
            end
          elsif wire.zero?
            shape << r.varint
          else
            wrong_wire("#{prefix}shape", at)
          end
        when 3
          wrong_wire("#{prefix}data", at) unless wire == 2
          data = r.bytes(at)
        else r.skip(wire, at, number)
        end
      end
      raise InvalidFieldError.new("absent or 0", field: "#{prefix}dtype") if dtype.zero?

      name = Dtype::BY_PROTO[dtype]
      raise UnknownDtypeError.new("unknown DType enum value #{dtype}", field: "#{prefix}dtype") unless name
      raise InvalidFieldError.new("#{shape.size} entries, must be two (n, d)", field: "#{prefix}shape") unless shape.size == 2

      Dtype.check_length!(data.bytesize, shape[0] * Dtype.row_bytes(name, shape[1]), field: "#{prefix}data")
      Tensor.new(data, dtype: name, shape: shape)
    end

    def read_response(body)
      r = Reader.new(body, 0, body.bytesize, true)
      model = nil
      tensor = nil
      usage = nil
      quantization = nil
      while r.more?
        number, wire, at = r.tag
        wrong_wire(%w[model embeddings usage quantization][number - 1], at) if number.between?(1, 4) && wire != 2
        case number
        when 1
          model = r.bytes(at).force_encoding(Encoding::UTF_8)
          raise MalformedError.new("model is not valid UTF-8", offset: at) unless model.valid_encoding?
        when 2 # offsets of errors inside stay absolute within the body
          payload = r.bytes(at)
          tensor = read_tensor(body, r.pos - payload.bytesize, r.pos, "embeddings.")
        when 3 then usage = read_usage(body, r, at)
        when 4
          quantization = r.bytes(at).force_encoding(Encoding::UTF_8)
          raise MalformedError.new("quantization is not valid UTF-8", offset: at) unless quantization.valid_encoding?
        else r.skip(wire, at, number)
        end
      end
      raise InvalidFieldError.new("absent", field: "embeddings") unless tensor

      quantization = nil if quantization&.empty? # proto3: absent and empty are the same
      Embeddings.new(tensor, model: model, usage: usage, quantization: quantization)
    end

    def read_usage(body, outer, at)
      payload = outer.bytes(at)
      r = Reader.new(body, outer.pos - payload.bytesize, outer.pos, false)
      counts = [0, 0]
      while r.more?
        number, wire, tag_at = r.tag
        if number.between?(1, 2)
          wrong_wire(%w[usage.prompt_tokens usage.total_tokens][number - 1], tag_at) unless wire.zero?
          counts[number - 1] = r.varint
        else
          r.skip(wire, tag_at, number)
        end
      end
      Usage.new(prompt_tokens: counts[0], total_tokens: counts[1])
    end

    # ---------------------------------------------------------------- google-protobuf interop
    # The generated classes (Densewire::V1::Tensor, ::Usage, ::EmbeddingsResponse, ::DType), which
    # need the google-protobuf gem (Debian: ruby-google-protobuf).
    def messages
      require_relative "v1/tensor_pb"
      Densewire::V1
    rescue LoadError => e
      raise LoadError, "densewire's Protobuf message classes need the google-protobuf gem: apt-get install " \
                       "ruby-google-protobuf (or gem install google-protobuf) (#{e.message})"
    end

    # A google-protobuf message object for a Tensor or Embeddings.
    def to_message(tensor, message: "Tensor", model: nil, usage: nil)
      messages.const_get(message.to_s).decode(encode(tensor, message: message, model: model, usage: usage))
    end

    # Embeddings from a google-protobuf Tensor or EmbeddingsResponse object.
    def from_message(msg)
      name = msg.class.descriptor.name.split(".").last
      decode(msg.class.encode(msg), message: name)
    end
  end
end
