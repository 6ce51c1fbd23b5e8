# frozen_string_literal: true

module Densewire
  # The Base64 codec (SPEC.md section 5): a whole tensor as one string, rows concatenated, in either
  # byte order. Encoding is RFC 4648 with padding; decoding is strict about the alphabet and padding
  # but accepts unpadded input and ignores the bits below the last whole byte.
  #
  # The fast path is Ruby's C decoder (unpack "m0", i.e. Base64.strict_decode64), which accepts only
  # canonical padded input; anything it refuses is re-checked here by the spec's rules, so that
  # unpadded input is accepted and an error names the offset of the offending character.
  module Base64
    ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    NOT_BASE64 = %r{[^A-Za-z0-9+/=]}.freeze

    module_function

    # Base64 text of a tensor (rows concatenated) in +byteorder+.
    def encode(tensor, byteorder: "little")
      encode_bytes(tensor.bytes(byteorder))
    end

    def encode_bytes(bytes)
      [bytes].pack("m0")
    end

    # Decodes +text+ to a Tensor of +dtype+ and +shape+ [n, d] whose bytes were written in
    # +byteorder+. Raises InvalidBase64Error, LengthMismatchError, UnknownDtypeError,
    # InvalidFieldError (shape, byteorder).
    def decode(text, dtype:, shape:, byteorder: "little", field: nil)
      dtype = Dtype.check!(dtype)
      shape = Dtype.check_shape!(shape)
      byteorder = Dtype.check_byteorder!(byteorder)
      bytes = decode_bytes(text, field: field)
      expected = shape[0] * Dtype.row_bytes(dtype, shape[1])
      Dtype.check_length!(bytes.bytesize, expected, field: field)
      Tensor.new(bytes, dtype: dtype, shape: shape, byteorder: byteorder)
    end

    # Strict decoding of section 5 to a binary String; errors carry the character offset.
    def decode_bytes(text, field: nil)
      raise InvalidFieldError.new("expected a Base64 string, got #{text.class}", field: field) unless text.is_a?(String)

      text.unpack1("m0")
    rescue ArgumentError
      text.unpack1("m0") if (text = canonical(text, field))
    end

    # Validates +text+ by section 5 and returns the canonical (padded, zero trailing bits) form that
    # Ruby's strict decoder accepts, or raises InvalidBase64Error at the offending character.
    def canonical(text, field)
      text = text.b unless text.valid_encoding? # offsets then count bytes
      if (bad = text.index(NOT_BASE64))
        raise InvalidBase64Error.new("invalid Base64 character #{text[bad].inspect} at offset #{bad}", offset: bad, field: field)
      end

      if (pad = text.index("="))
        tail = text.size - pad
        unless tail <= 2 && text.size % 4 == 0 && [2, 3].include?(pad % 4) && text[pad..].count("=") == tail
          raise InvalidBase64Error.new("misplaced or excess padding at offset #{pad}", offset: pad, field: field)
        end

        body = text[0, pad]
      else
        if text.size % 4 == 1
          raise InvalidBase64Error.new("dangling character at offset #{text.size - 1} (a lone character cannot make a byte)",
                                       offset: text.size - 1, field: field)
        end

        body = text
      end
      case body.size % 4
      when 2 then body = "#{body[0...-1]}#{ALPHABET[ALPHABET.index(body[-1]) & 0x30]}=="
      when 3 then body = "#{body[0...-1]}#{ALPHABET[ALPHABET.index(body[-1]) & 0x3C]}="
      end
      body
    end
  end
end
