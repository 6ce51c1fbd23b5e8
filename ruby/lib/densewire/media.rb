# frozen_string_literal: true

require "zlib"

module Densewire
  # Media types, content negotiation and body decoding by media type (SPEC.md section 12).
  module Media
    JSON = "application/json"
    RAW = "application/octet-stream"
    MSGPACK = "application/vnd.msgpack"
    PROTOBUF = "application/protobuf"
    ARROW = "application/vnd.apache.arrow.stream"

    # format => media type, in the server's order of preference (JSON first).
    TYPES = { json: JSON, raw: RAW, msgpack: MSGPACK, protobuf: PROTOBUF, arrow: ARROW }.freeze
    ALIASES = { "application/msgpack" => :msgpack, "application/x-msgpack" => :msgpack,
                "application/x-protobuf" => :protobuf }.freeze
    # What this gem can encode and decode.
    SUPPORTED = %i[json raw msgpack protobuf arrow].freeze

    module_function

    # The format (:json, :raw, :msgpack, :protobuf, :arrow) of a Content-Type value, or nil.
    def format_of(content_type)
      type = content_type.to_s.split(";", 2).first.to_s.strip.downcase
      TYPES.key(type) || ALIASES[type]
    end

    # Picks the response format for an Accept header value (RFC 9110 section 12.5.1, as SPEC.md
    # section 12 says): highest q wins, the most specific matching range gives a type its q, q=0
    # excludes, ties go to the server's order. A +format+ query parameter value overrides Accept.
    # Raises NotAcceptableError listing the supported types when nothing fits.
    def negotiate(accept, format: nil, supported: SUPPORTED)
      if format
        chosen = format.to_s.to_sym
        return chosen if supported.include?(chosen)

        raise NotAcceptableError.new("format #{format.to_s.inspect} is not served; supported: #{supported.join(", ")}",
                                     field: "format")
      end
      accept = accept.to_s.strip
      return :json if accept.empty? && supported.include?(:json)

      ranges = parse_accept(accept)
      best = nil
      best_q = 0.0
      supported.each do |fmt|
        q = quality(ranges, fmt)
        if q > best_q
          best = fmt
          best_q = q
        end
      end
      return best if best

      raise NotAcceptableError.new("nothing in Accept can be served; supported: " \
                                   "#{supported.map { |f| TYPES[f] }.join(", ")}", field: "Accept")
    end

    # [[type, subtype, q], ...] of an Accept header.
    def parse_accept(accept)
      accept.split(",").filter_map do |part|
        range, *params = part.split(";").map(&:strip)
        next if range.nil? || range.empty?

        type, subtype = range.downcase.split("/", 2)
        q = 1.0
        params.each do |param|
          key, value = param.split("=", 2).map(&:strip)
          q = Float(value, exception: false) || 0.0 if key&.downcase == "q"
        end
        [type, subtype || "*", q.clamp(0.0, 1.0)]
      end
    end

    def quality(ranges, fmt)
      names = [TYPES[fmt]] + ALIASES.select { |_, f| f == fmt }.keys
      best_specificity = -1
      q = 0.0
      ranges.each do |type, subtype, range_q|
        specificity =
          if type == "*" && subtype == "*" then 0
          elsif subtype == "*" && names.any? { |n| n.start_with?("#{type}/") } then 1
          elsif names.include?("#{type}/#{subtype}") then 2
          end
        next if specificity.nil?

        if specificity > best_specificity || (specificity == best_specificity && range_q > q)
          best_specificity = specificity
          q = range_q
        end
      end
      q
    end

    # Decodes an HTTP response body into Embeddings by its Content-Type (and Content-Encoding,
    # gzip being the one a Ruby client asks for). +headers+ are needed for raw bodies.
    def decode_response(body, content_type:, headers: {}, content_encoding: nil)
      body = inflate(body, content_encoding)
      case format_of(content_type)
      when :json then JSONEnvelope.decode(body)
      when :raw then Raw.decode(body, headers)
      when :msgpack then Msgpack.decode(body)
      when :protobuf then Protobuf.decode(body, message: "EmbeddingsResponse")
      when :arrow then Arrow.decode(body)
      else raise UnsupportedMediaTypeError.new("unexpected Content-Type #{content_type.inspect}", field: "Content-Type")
      end
    end

    # The response body for Embeddings in +format+: [content_type, extra headers, body].
    def encode_response(embeddings, format, encoding_format: "base64", byteorder: "little")
      case format.to_sym
      when :json
        [JSON, {}, JSONEnvelope.encode(embeddings, encoding_format: encoding_format, byteorder: byteorder)]
      when :raw
        headers, body = Raw.encode(embeddings)
        [RAW, headers, body]
      when :msgpack then [MSGPACK, {}, Msgpack.encode(embeddings)]
      when :protobuf then [PROTOBUF, {}, Protobuf.encode(embeddings, message: "EmbeddingsResponse")]
      when :arrow then [ARROW, {}, Arrow.encode(embeddings)]
      else raise UnsupportedMediaTypeError.new("cannot encode #{format}", field: "format")
      end
    end

    def inflate(body, content_encoding)
      case content_encoding.to_s.strip.downcase
      when "", "identity" then body
      when "gzip", "x-gzip" then Zlib.gunzip(body)
      when "deflate" then Zlib::Inflate.inflate(body)
      else raise UnsupportedMediaTypeError.new("unsupported Content-Encoding #{content_encoding.inspect}",
                                               field: "Content-Encoding")
      end
    rescue Zlib::Error => e
      raise MalformedError.new("the #{content_encoding} body does not inflate: #{e.message}")
    end
  end
end
