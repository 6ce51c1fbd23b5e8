# frozen_string_literal: true

require "json"

module Densewire
  # The JSON embeddings envelope of SPEC.md section 6 (application/json): OpenAI's response shape,
  # rows as Base64 strings or arrays of numbers, plus densewire's dtype/byteorder/dimensions.
  module JSONEnvelope
    ENCODING_FORMATS = %w[float base64].freeze

    module_function

    # Writes the response for +tensor+ (a Tensor, or Embeddings whose model, usage and quantization
    # are used). Keys come in the spec's order (+quantization+, the id of int8/uint8 rows' ranges,
    # after dimensions); numbers are the shortest decimals that read back to the same bits. NaN or
    # infinity with encoding_format "float" raises NonFiniteError naming the item.
    def encode(tensor, encoding_format: "float", byteorder: "little", model: nil, usage: nil, quantization: nil)
      if tensor.is_a?(Embeddings)
        model ||= tensor.model
        usage ||= tensor.usage
        quantization ||= tensor.quantization
        tensor = tensor.tensor
      end
      quantization = Quantization.check!(quantization)
      unless ENCODING_FORMATS.include?(encoding_format.to_s)
        raise InvalidFieldError.new("encoding_format must be \"float\" or \"base64\"", field: "encoding_format")
      end

      byteorder = Dtype.check_byteorder!(byteorder)
      base64 = encoding_format.to_s == "base64"
      byteorder = "little" unless base64
      rows = base64 ? tensor.packed_rows(byteorder).map { |r| JSON.generate([r].pack("m0")) } : number_rows(tensor)
      usage = usage.to_h
      data = rows.each_with_index.map { |emb, i| %({"object":"embedding","index":#{i},"embedding":#{emb}}) }
      +%({"object":"list","data":[#{data.join(",")}],"model":#{JSON.generate((model || "").to_s)},) <<
        %("usage":{"prompt_tokens":#{Integer(usage["prompt_tokens"] || usage[:prompt_tokens] || 0)},) <<
        %("total_tokens":#{Integer(usage["total_tokens"] || usage[:total_tokens] || 0)}},) <<
        %("dtype":"#{tensor.dtype}","byteorder":"#{byteorder}","dimensions":#{tensor.d}) <<
        (quantization ? %(,"quantization":#{JSON.generate(quantization)}}) : "}")
    end

    # Parses a response (SPEC.md section 6.2) into Embeddings. Absent dtype, byteorder and
    # dimensions default to float32, little and the first row's length. Rows are placed by index.
    # The quantization id of int8/uint8 rows is Embeddings#quantization.
    #
    # Fast path: the Base64 row strings (most of the bytes) are cut out of the text with String#index
    # and only the small rest goes through JSON.parse. Anything unusual there (escapes, a parse error,
    # any decoding error) falls back to parsing the whole text, so results and errors are the same.
    def decode(text)
      check_utf8!(text)
      if (fast = parse_without_rows(text))
        begin
          return decode_doc(*fast)
        rescue Error, FastPathMiss
          nil # the plain parse below gives the same result or the canonical error
        end
      end
      decode_doc(parse(text), nil)
    end

    # Raised inside the fast path when its input is not what it can handle.
    class FastPathMiss < StandardError; end

    EMBEDDING_KEY = '"embedding"'
    PLAIN_BASE64 = %r{\A[A-Za-z0-9+/=]*\z}n.freeze
    NUL_ESCAPE = "\\u0000"
    JSON_SPACE = [0x20, 0x09, 0x0a, 0x0d].freeze # the whitespace JSON allows between tokens

    # [doc, rows]: the text parsed with each "embedding": "..." string replaced by "\u0000K", where
    # K indexes +rows+ (the strings' raw bytes). nil when there is nothing to gain or it cannot apply.
    #
    # The scan is String#index (memchr/memmem speed) for the key, then a few byte checks for
    # `: "`; the Base64 itself is skipped with one String#index for its closing quote. Only the
    # text between rows (about 1% of a Base64 response) is copied, and it is checked for "\u0000",
    # the placeholder mark, so that no string of the original text can pass for a placeholder.
    def parse_without_rows(text)
      src = text.to_s.b
      skeleton = String.new(capacity: 256 + src.bytesize / 64, encoding: Encoding::BINARY)
      rows = []
      pos = 0 # start of the text not yet copied to +skeleton+
      from = 0 # where to look for the next key
      while (key = src.index(EMBEDDING_KEY, from))
        unless (start = string_value_start(src, key + EMBEDDING_KEY.bytesize))
          from = key + 1
          next
        end
        stop = src.index('"', start) or return nil
        between = src.byteslice(pos, start - pos)
        return nil if between.include?(NUL_ESCAPE)

        skeleton << between << NUL_ESCAPE << rows.size.to_s
        rows << src.byteslice(start, stop - start)
        pos = from = stop
      end
      return nil if rows.empty?

      rest = src.byteslice(pos, src.bytesize - pos)
      return nil if rest.include?(NUL_ESCAPE)

      skeleton << rest
      [JSON.parse(skeleton), rows]
    rescue JSON::ParserError
      nil
    end

    # After a key ending at +i+: the offset just past the opening quote when `\s*:\s*"` follows,
    # else nil.
    def string_value_start(src, i)
      i += 1 while JSON_SPACE.include?(src.getbyte(i))
      return nil unless src.getbyte(i) == 0x3a # ':'

      i += 1
      i += 1 while JSON_SPACE.include?(src.getbyte(i))
      src.getbyte(i) == 0x22 ? i + 1 : nil # '"'
    end

    def decode_doc(doc, cut_rows)
      raise MalformedError.new("the response is not a JSON object") unless doc.is_a?(Hash)

      Dtype.check_no_kind!(doc, "kind")
      data = doc["data"]
      raise InvalidFieldError.new("missing or not an array", field: "data") unless data.is_a?(Array)

      dtype = doc.key?("dtype") ? Dtype.check!(doc["dtype"]) : "float32"
      byteorder = doc.key?("byteorder") ? Dtype.check_byteorder!(doc["byteorder"]) : "little"
      d = doc["dimensions"]
      unless d.nil? || (d.is_a?(Integer) && d >= 0)
        raise InvalidFieldError.new("dimensions must be a non-negative integer", field: "dimensions")
      end

      placed = place_rows(data)
      restore_rows(data, cut_rows) if cut_rows
      d ||= first_row_dimensions(data, dtype)
      row_bytes = Dtype.row_bytes(dtype, d)
      rows = Array.new(data.size)
      data.each_with_index do |entry, i|
        emb = entry["embedding"]
        rows[placed[i]] =
          case emb
          when String
            bytes = base64_row(emb, i)
            check_length!(bytes.bytesize, row_bytes, i) unless bytes.bytesize == row_bytes
            byteorder == "big" ? Dtype.swap(bytes, dtype) : bytes # byteorder applies to Base64 rows only
          when Array then number_row(emb, dtype, d, "data[#{i}].embedding")
          else raise InvalidFieldError.new("embedding must be a Base64 string or an array of numbers", field: "data[#{i}].embedding")
          end
      end
      buf = rows.join # sizes the result once: faster than appending to a String
      tensor = Tensor.new(buf, dtype: dtype, shape: [data.size, d])
      Embeddings.new(tensor, model: doc["model"].is_a?(String) ? doc["model"] : nil, usage: Usage.parse(doc["usage"]),
                             quantization: Quantization.read_id(doc["quantization"], "quantization"))
    end

    # One Base64 row: Ruby's strict C decoder; what it refuses goes through Base64.decode_bytes for
    # the spec's rules and the error naming the row (the field name is built only then).
    def base64_row(emb, i)
      emb.unpack1("m0")
    rescue ArgumentError
      Base64.decode_bytes(emb, field: "data[#{i}].embedding")
    end

    def check_length!(actual, row_bytes, i)
      Dtype.check_length!(actual, row_bytes, field: "data[#{i}].embedding")
    end

    # Puts the cut-out strings back in data[i].embedding. Each must be used once, and every string
    # cut from elsewhere must be plain Base64 characters, as the full parse would then agree.
    def restore_rows(data, cut_rows)
      used = Array.new(cut_rows.size, false)
      data.each do |entry|
        emb = entry["embedding"]
        next unless emb.is_a?(String) && emb.start_with?("\0")

        k = emb[1..].to_i
        raise FastPathMiss if used[k] != false || emb != "\0#{k}"

        used[k] = true
        entry["embedding"] = cut_rows[k] # a row that is not plain Base64 fails to decode: fall back
      end
      used.each_with_index { |u, k| raise FastPathMiss unless u || cut_rows[k].match?(PLAIN_BASE64) }
    end

    # JSON text is UTF-8 (SPEC.md section 6, RFC 8259): Ruby's parser would take a key that is not as
    # it is (found by comparing the decoders on fuzzed bodies), so it is malformed, at its first byte.
    def check_utf8!(text)
      utf8 = text.to_s.dup.force_encoding(Encoding::UTF_8)
      return if utf8.valid_encoding?

      at = 0
      utf8.each_char { |c| c.valid_encoding? ? at += c.bytesize : break }
      raise MalformedError.new("the JSON text is not valid UTF-8 (byte #{at})", offset: at)
    end

    def parse(text)
      JSON.parse(text)
    rescue JSON::ParserError => e
      raise MalformedError.new("not valid JSON: #{e.message[0, 120]}")
    end

    # Maps position -> index, checking that indexes are a permutation of 0...size.
    def place_rows(data)
      seen = Array.new(data.size, false)
      data.each_with_index.map do |entry, i|
        raise InvalidFieldError.new("each data item must be an object", field: "data[#{i}]") unless entry.is_a?(Hash)

        raise InvalidFieldError.new("index is missing", field: "data[#{i}].index") unless entry.key?("index")
        index = entry["index"]
        raise InvalidFieldError.new("index must be an integer", field: "data[#{i}].index") unless index.is_a?(Integer)
        unless index >= 0 && index < data.size && !seen[index]
          why = index >= 0 && index < data.size ? "index #{index} occurs twice" : "index #{index} is outside [0, #{data.size})"
          raise ShapeMismatchError.new(why, field: "data[#{i}].index")
        end

        seen[index] = true
        index
      end
    end

    def first_row_dimensions(data, dtype)
      return 0 if data.empty?

      emb = data[0]["embedding"]
      case emb
      when String
        bytes = Base64.decode_bytes(emb, field: "data[0].embedding").bytesize
        dtype == "binary" ? 8 * bytes : bytes / Dtype.item_bytes(dtype)
      when Array then dtype == "binary" ? 8 * emb.size : emb.size
      else 0 # reported as invalid_field by the row loop
      end
    end

    def number_row(values, dtype, d, field)
      width = Dtype.row_items(dtype, d)
      unless values.size == width
        raise ShapeMismatchError.new("#{values.size} numbers, expected #{width}#{dtype == "binary" ? " packed bytes" : ""}",
                                     field: field)
      end

      case dtype
      when "int8", "uint8", "binary"
        lo, hi = dtype == "int8" ? [-128, 127] : [0, 255]
        ints = values.each_with_index.map do |v, j|
          # 3.0 is the integer 3 (SPEC.md section 3.5)
          v = v.to_i if v.is_a?(Float) && v.finite? && v == v.floor
          raise InvalidFieldError.new("#{v.inspect} is not in #{lo}..#{hi}", field: "#{field}[#{j}]") unless v.is_a?(Integer) && v.between?(lo, hi)

          v
        end
        ints.pack(dtype == "int8" ? "c*" : "C*")
      else
        begin
          Convert.pack_floats(values, dtype)
        rescue TypeError, ArgumentError
          j = values.index { |v| !v.is_a?(Numeric) }
          raise InvalidFieldError.new("not a number: #{values[j].inspect}", field: "#{field}[#{j}]")
        end
      end
    end

    def number_rows(tensor)
      dtype = tensor.dtype
      values = tensor.to_a
      width = Dtype.row_items(dtype, tensor.d)
      return Array.new(tensor.n) { "[]" } if width.zero?
      return values.each_slice(width).map { |row| "[#{row.join(",")}]" } unless Dtype::FLOATS.include?(dtype)

      bits = tensor.bits
      values.each_slice(width).with_index.map do |row, i|
        nums = row.each_with_index.map do |v, j|
          unless v.finite?
            raise NonFiniteError.new("#{v} has no JSON number form; use encoding_format \"base64\"",
                                     field: "data[#{i}].embedding[#{j}]")
          end

          Convert.shortest_decimal(v, bits[i * width + j], dtype)
        end
        "[#{nums.join(",")}]"
      end
    end

  end
end
