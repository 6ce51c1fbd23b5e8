# frozen_string_literal: true

require "json"

module Densewire
  # Ragged and sparse tensors in Protobuf (SPEC.md 20.6: RaggedTensor, SparseTensor and their
  # responses) and in the JSON envelope (20.3).
  module Kinds
    PB_MESSAGES = { "ragged" => %w[RaggedTensor RaggedEmbeddingsResponse], "sparse" => %w[SparseTensor SparseEmbeddingsResponse] }.freeze

    module_function

    # ---------------------------------------------------------------- Protobuf (20.6)
    def pb_tensor(t)
      shape = Protobuf.varint(t.shape[0]) << Protobuf.varint(t.shape[1])
      out = Protobuf.varint(1 << 3) << Protobuf.varint(Dtype.proto_enum(t.dtype)) << Protobuf.field_bytes(2, shape)
      out << Protobuf.field_bytes(3, t.offsets.pack("V*"))
      if t.kind == "sparse"
        out << Protobuf.field_bytes(4, t.indices.pack("V*")) unless t.indices.empty?
        out << Protobuf.field_bytes(5, t.data) unless t.data.empty?
      else
        out << Protobuf.field_bytes(4, t.data) unless t.data.empty?
      end
      out
    end

    # The body of +message+ (the tensor message, or the response with model and usage).
    def encode_protobuf(t, message: nil, model: nil, usage: nil)
      model ||= t.model
      usage = usage_of(usage || t.usage)
      message ||= model || usage ? PB_MESSAGES[t.kind][1] : PB_MESSAGES[t.kind][0]
      raise ArgumentError, "unknown message #{message}" unless PB_MESSAGES[t.kind].include?(message)
      return pb_tensor(t) if message == PB_MESSAGES[t.kind][0]

      out = +"".b
      out << Protobuf.field_bytes(1, model.to_s.b) unless model.to_s.empty?
      out << Protobuf.field_bytes(2, pb_tensor(t))
      u = +"".b
      u << Protobuf.varint(1 << 3) << Protobuf.varint(usage["prompt_tokens"]) if usage && usage["prompt_tokens"] != 0
      u << Protobuf.varint(2 << 3) << Protobuf.varint(usage["total_tokens"]) if usage && usage["total_tokens"] != 0
      out << Protobuf.field_bytes(3, u)
    end

    def decode_protobuf(body, kind:, message: nil)
      body = body.to_s.b
      message ||= PB_MESSAGES[kind][0]
      raise ArgumentError, "unknown message #{message}" unless PB_MESSAGES[kind].include?(message)
      return read_pb_kind(body, 0, body.bytesize, "", kind) if message == PB_MESSAGES[kind][0]

      r = Protobuf::Reader.new(body, 0, body.bytesize, true)
      model = ""
      usage = nil
      fields = nil
      while r.more?
        number, wire, at = r.tag
        Protobuf.wrong_wire(%w[model embeddings usage][number - 1], at) if number.between?(1, 3) && wire != 2
        case number
        when 1 then model = r.bytes(at).force_encoding(Encoding::UTF_8)
        when 2
          payload = r.bytes(at)
          fields = [r.pos - payload.bytesize, r.pos]
        when 3 then usage = Protobuf.read_usage(body, r, at)
        else r.skip(wire, at, number)
        end
      end
      raise InvalidFieldError.new("absent", field: "embeddings") unless fields

      read_pb_kind(body, fields[0], fields[1], "embeddings.", kind, model: model, usage: usage || Usage.new(prompt_tokens: 0, total_tokens: 0))
    end

    def read_pb_kind(body, start, limit, prefix, kind, model: nil, usage: nil)
      r = Protobuf::Reader.new(body, start, limit, prefix.empty?)
      dtype = 0
      shape = []
      parts = {}
      last = kind == "sparse" ? 5 : 4
      while r.more?
        number, wire, at = r.tag
        if number == 1
          Protobuf.wrong_wire("#{prefix}dtype", at) unless wire.zero?
          dtype = r.varint
        elsif number == 2 && wire == 2
          payload = r.bytes(at)
          packed = Protobuf::Reader.new(body, r.pos - payload.bytesize, r.pos, false)
          begin
            shape << packed.varint while packed.more?
          rescue MalformedError
            raise MalformedError.new("a packed shape entry runs past the end of its field", offset: at)
          end
        elsif number == 2
          Protobuf.wrong_wire("#{prefix}shape", at) unless wire.zero?
          shape << r.varint
        elsif number.between?(3, last)
          Protobuf.wrong_wire("#{prefix}#{number}", at) unless wire == 2
          parts[number] = r.bytes(at)
        else r.skip(wire, at, number)
        end
      end
      raise InvalidFieldError.new("absent or 0", field: "#{prefix}dtype") if dtype.zero?

      name = Dtype::BY_PROTO[dtype]
      raise UnknownDtypeError.new("unknown DType enum value #{dtype}", field: "#{prefix}dtype") unless name

      name = sparse_dtype!(name, "#{prefix}dtype") if kind == "sparse"
      raise InvalidFieldError.new("#{shape.size} entries, must be two", field: "#{prefix}shape") unless shape.size == 2

      vocabulary!(shape[1], "#{prefix}shape") if kind == "sparse"
      offsets = check_offsets!(parts[3] || "".b, shape[0], field: "#{prefix}offsets")
      k = offsets[-1]
      if kind == "ragged"
        data = parts[4] || "".b
        Dtype.check_length!(data.bytesize, k * Dtype.row_bytes(name, shape[1]), field: "#{prefix}data")
        return RaggedTensor.new(data, dtype: name, d: shape[1], offsets: offsets, model: model, usage: usage)
      end
      ib = parts[4] || "".b
      Dtype.check_length!(ib.bytesize, 4 * k, field: "#{prefix}indices")
      data = parts[5] || "".b
      Dtype.check_length!(data.bytesize, k * Dtype.item_bytes(name), field: "#{prefix}data")
      indices = ib.unpack("V*")
      check_indices!(indices, offsets, shape[1], field: "#{prefix}indices")
      SparseTensor.new(data, dtype: name, vocabulary: shape[1], offsets: offsets, indices: indices, model: model, usage: usage)
    end

    # ---------------------------------------------------------------- JSON envelope (20.3)
    def encode_json(t, encoding_format: "float", byteorder: "little", model: nil, usage: nil)
      model ||= t.model
      usage = usage_of(usage || t.usage) || { "prompt_tokens" => 0, "total_tokens" => 0 }
      raise InvalidFieldError.new("encoding_format must be \"float\" or \"base64\"", field: "encoding_format") unless %w[float base64].include?(encoding_format.to_s)

      base64 = encoding_format.to_s == "base64"
      byteorder = base64 ? Dtype.check_byteorder!(byteorder) : "little"
      swap = ->(bytes, dtype) { byteorder == "big" ? Dtype.swap(bytes, dtype) : bytes }
      items = (0...t.shape[0]).map do |i|
        if t.kind == "ragged"
          m = t.matrix(i)
          emb = base64 ? JSON.generate([swap.call(m.data, t.dtype)].pack("m0")) : "[#{m.n.zero? ? "" : JSONEnvelope.number_rows(m).join(",")}]"
          %({"object":"embedding","index":#{i},"embedding":#{emb},"shape":[#{m.n},#{t.shape[1]}]})
        else
          ind, vals = t.vector(i)
          if base64
            ib = ind.pack("V*")
            ib = Dtype.swap(ib, "float32") if byteorder == "big" # 4-byte items
            parts = %("indices":#{JSON.generate([ib].pack("m0"))},"values":#{JSON.generate([swap.call(vals, t.dtype)].pack("m0"))})
          else
            values = ind.empty? ? "[]" : JSONEnvelope.number_rows(Tensor.new(vals, dtype: t.dtype, shape: [1, ind.size])).first
            parts = %("indices":[#{ind.join(",")}],"values":#{values})
          end
          %({"object":"sparse_embedding","index":#{i},#{parts},"nnz":#{ind.size}})
        end
      end
      %({"object":"list","data":[#{items.join(",")}],"model":#{JSON.generate(model.to_s)},) +
        %("usage":{"prompt_tokens":#{usage["prompt_tokens"]},"total_tokens":#{usage["total_tokens"]}},) +
        %("kind":"#{t.kind}","dtype":"#{t.dtype}","byteorder":"#{byteorder}","dimensions":#{t.shape[1]}})
    end

    # SPEC.md 20.3's order: the envelope's keys (kind, data, dtype, byteorder, dimensions, model, usage),
    # every item's index, then each item in the order of data (by position), in full before the next.
    def decode_json(text, kind:)
      JSONEnvelope.check_utf8!(text)
      doc = JSONEnvelope.parse(text)
      raise MalformedError, "the response is not a JSON object" unless doc.is_a?(Hash)
      raise InvalidFieldError.new("a #{kind} response says \"kind\": \"#{kind}\"", field: "kind") unless doc["kind"] == kind

      data = doc["data"]
      raise InvalidFieldError.new("missing or not an array", field: "data") unless data.is_a?(Array)

      dtype = if !doc.key?("dtype") then "float32"
              elsif kind == "ragged" then Dtype.check!(doc["dtype"])
              else sparse_dtype!(doc["dtype"])
              end
      byteorder = doc.key?("byteorder") ? Dtype.check_byteorder!(doc["byteorder"]) : "little"
      dims = doc["dimensions"]
      raise InvalidFieldError.new("required for #{kind} tensors, a non-negative integer", field: "dimensions") unless dims.is_a?(Integer) && dims >= 0

      vocabulary!(dims, "dimensions") if kind == "sparse"
      model = doc["model"]
      raise InvalidFieldError.new("must be a string", field: "model") unless model.nil? || model.is_a?(String)

      usage = Usage.parse(doc["usage"])
      placed = JSONEnvelope.place_rows(data)
      kind == "ragged" ? ragged_json(data, placed, dtype, dims, byteorder, model, usage) : sparse_json(data, placed, dtype, dims, byteorder, model, usage)
    end

    def ragged_json(data, placed, dtype, d, byteorder, model, usage)
      rb = Dtype.row_bytes(dtype, d)
      rows = Array.new(data.size)
      data.each_with_index do |item, i|
        f = "data[#{i}]"
        shape = item["shape"]
        emb = item["embedding"]
        raise InvalidFieldError.new("required for a Base64 item", field: "#{f}.shape") if shape.nil? && emb.is_a?(String)

        unless shape.nil?
          raise InvalidFieldError.new("must be two non-negative integers", field: "#{f}.shape") unless shape.is_a?(Array) && shape.size == 2 && shape.all? { |x| x.is_a?(Integer) && x >= 0 }
          raise ShapeMismatchError.new("#{shape.inspect} disagrees with dimensions #{d}", field: "#{f}.shape") unless shape[1] == d
        end
        raise InvalidFieldError.new("must be a Base64 string or an array of rows", field: "#{f}.embedding") unless emb.is_a?(String) || emb.is_a?(Array)
        raise ShapeMismatchError.new("#{shape.inspect} but #{emb.size} rows", field: "#{f}.shape") if emb.is_a?(Array) && shape && emb.size != shape[0]

        f = "#{f}.embedding"
        rows[placed[i]] = if emb.is_a?(String)
                            bytes = Base64.decode_bytes(emb, field: f)
                            Dtype.check_length!(bytes.bytesize, shape[0] * rb, field: f)
                            [byteorder == "big" ? Dtype.swap(bytes, dtype) : bytes, shape[0]]
                          else
                            [emb.each_with_index.map do |row, r|
                              raise ShapeMismatchError.new("must be an array of #{Dtype.row_items(dtype, d)} items", field: "#{f}[#{r}]") unless row.is_a?(Array)

                              JSONEnvelope.number_row(row, dtype, d, "#{f}[#{r}]")
                            end.join, emb.size]
                          end
      end
      offsets = rows.each_with_object([0]) { |(_, m), o| o << (o[-1] + m) }
      RaggedTensor.new(rows.map(&:first).join.b, dtype: dtype, d: d, offsets: offsets, model: model, usage: usage)
    end

    def sparse_json(data, placed, dtype, v, byteorder, model, usage)
      size = Dtype.item_bytes(dtype)
      parts = Array.new(data.size)
      data.each_with_index do |item, i|
        f = "data[#{i}]"
        nnz, ind, val = item["nnz"], item["indices"], item["values"]
        raise InvalidFieldError.new("required for a Base64 item", field: "#{f}.nnz") if nnz.nil? && ind.is_a?(String)
        raise InvalidFieldError.new("must be a non-negative integer", field: "#{f}.nnz") unless nnz.nil? || (nnz.is_a?(Integer) && nnz >= 0)
        raise InvalidFieldError.new("must be a Base64 string or an array", field: "#{f}.indices") unless ind.is_a?(String) || ind.is_a?(Array)
        raise InvalidFieldError.new("must be of the kind of indices", field: "#{f}.values") unless val.instance_of?(ind.class)

        if ind.is_a?(String)
          ib = Base64.decode_bytes(ind, field: "#{f}.indices")
          Dtype.check_length!(ib.bytesize, 4 * nnz, field: "#{f}.indices")
          vb = Base64.decode_bytes(val, field: "#{f}.values")
          Dtype.check_length!(vb.bytesize, nnz * size, field: "#{f}.values")
          ib = Dtype.swap(ib, "float32") if byteorder == "big"
          vb = Dtype.swap(vb, dtype) if byteorder == "big"
          vec = ib.unpack("V*")
        else
          ind.each_with_index do |x, j|
            raise InvalidFieldError.new("must be an integer from 0 to 2^32 - 1", field: "#{f}.indices[#{j}]") unless x.is_a?(Integer) && x.between?(0, MAX_VOCABULARY - 1)
          end
          raise ShapeMismatchError.new("#{ind.size} indices, #{val.size} values", field: "#{f}.values") if val.size != ind.size || (nnz && nnz != ind.size)

          vb = ind.empty? ? "".b : JSONEnvelope.number_row(val, dtype, ind.size, "#{f}.values")
          vec = ind
        end
        check_indices!(vec, [0, vec.size], v) { |j| "#{f}.indices[#{j}]" }
        parts[placed[i]] = [vec, vb]
      end
      offsets = parts.each_with_object([0]) { |(vec, _), o| o << (o[-1] + vec.size) }
      SparseTensor.new(parts.map(&:last).join.b, dtype: dtype, vocabulary: v, offsets: offsets, indices: parts.flat_map(&:first),
                                                 model: model, usage: usage)
    end
  end
end
