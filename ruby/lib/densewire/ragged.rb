# frozen_string_literal: true

module Densewire
  # n matrices of m_i x d over one buffer (SPEC.md section 20, "Ragged and sparse tensors", 20.1):
  # token embeddings, multi-vectors. +data+ is the N = offsets[n] rows as one binary String (a
  # byteslice of the body a decoder read, which MRI shares rather than copies); #matrix(i) is matrix
  # i as a Tensor over a byteslice of it.
  class RaggedTensor
    attr_reader :dtype, :shape, :offsets, :data, :model, :usage

    def initialize(data, dtype:, d:, offsets:, model: nil, usage: nil)
      @dtype = Dtype.check!(dtype)
      @offsets = Kinds.check_offset_values!(offsets)
      @shape = [offsets.size - 1, Integer(d)]
      Dtype.check_length!(data.bytesize, offsets[-1] * Dtype.row_bytes(@dtype, d), field: "data")
      @data = data.b.freeze
      @model = model
      @usage = usage
    end

    def kind = "ragged"

    # Matrix i (rows offsets[i] to offsets[i + 1] - 1) as a Tensor.
    def matrix(i)
      rb = Dtype.row_bytes(dtype, shape[1])
      a, b = offsets.fetch(i), offsets.fetch(i + 1)
      Tensor.new(data.byteslice(a * rb, (b - a) * rb), dtype: dtype, shape: [b - a, shape[1]])
    end
  end

  # n sparse vectors over a vocabulary of V (20.2): strictly ascending +indices+ (Integers below V)
  # and their values (+data+, a binary String of a float dtype), split by +offsets+.
  class SparseTensor
    attr_reader :dtype, :shape, :offsets, :indices, :data, :model, :usage

    def initialize(data, dtype:, vocabulary:, offsets:, indices:, model: nil, usage: nil)
      @dtype = Kinds.sparse_dtype!(dtype)
      @shape = [offsets.size - 1, Kinds.vocabulary!(vocabulary, "shape")]
      @offsets = Kinds.check_offset_values!(offsets)
      k = offsets[-1]
      Dtype.check_length!(4 * indices.size, 4 * k, field: "indices")
      Dtype.check_length!(data.bytesize, k * Dtype.item_bytes(@dtype), field: "data")
      Kinds.check_indices!(indices, offsets, @shape[1])
      @indices = indices
      @data = data.b.freeze
      @model = model
      @usage = usage
    end

    def kind = "sparse"

    # Vector i: [its indices, its values' bytes].
    def vector(i)
      a, b = offsets.fetch(i), offsets.fetch(i + 1)
      size = Dtype.item_bytes(dtype)
      [indices[a...b], data.byteslice(a * size, (b - a) * size)]
    end
  end

  # The codecs of ragged and sparse tensors in the raw body and MessagePack (this file) and in
  # Protobuf and the JSON envelope (ragged_formats.rb), with the checks every format shares.
  module Kinds
    SPARSE_DTYPES = %w[float32 float16 bfloat16 float64].freeze
    MAX_VOCABULARY = 2**32

    module_function

    def sparse_dtype!(dtype, field = "dtype")
      dtype = Dtype.check!(dtype, field: field)
      return dtype if SPARSE_DTYPES.include?(dtype)

      raise InvalidFieldError.new("a sparse tensor's values are float32, float16, bfloat16 or float64, not #{dtype}", field: field)
    end

    def vocabulary!(v, field)
      return v if v.is_a?(Integer) && v.between?(1, MAX_VOCABULARY)

      raise InvalidFieldError.new("the vocabulary size must be an integer from 1 to 2^32, got #{v.inspect[0, 40]}", field: field)
    end

    # 20.1 checks 2 and 3 on the offsets' bytes of a batch of n (offsets relative to +base+).
    def check_offsets!(bytes, n, base: 0, field: "offsets")
      expected = 4 * (n + 1)
      if bytes.bytesize != expected
        raise LengthMismatchError.new("#{bytes.bytesize} bytes of offsets, a batch of #{n} needs #{expected}",
                                      offset: base + [bytes.bytesize, expected].min, field: field)
      end
      check_offset_values!(bytes.unpack("V*"), base: base, field: field)
    end

    def check_offset_values!(offsets, base: 0, field: "offsets")
      raise InvalidFieldError.new("the first offset must be 0, got #{offsets[0].inspect}", offset: base, field: field) unless offsets[0] == 0

      offsets.each_cons(2).with_index do |(a, b), k|
        raise InvalidFieldError.new("offset #{k + 1} (#{b}) is below the one before it (#{a})", offset: base + 4 * (k + 1), field: field) if b < a
      end
      offsets
    end

    # 20.2 check 5: each index below v and above the one before it in its vector (offset base + 4j;
    # a block names the field of entry j instead).
    def check_indices!(indices, offsets, v, base: 0, field: "indices", &field_of)
      vec = 0
      indices.each_with_index do |x, j|
        vec += 1 while offsets[vec + 1] <= j
        why = if x >= v then "index #{x} is not below the vocabulary size #{v}"
              elsif j > offsets[vec] && x <= indices[j - 1] then "index #{x} is not above the index before it"
              end
        next unless why

        raise InvalidFieldError.new(why, field: field_of.call(j)) if field_of

        raise InvalidFieldError.new(why, offset: base + 4 * j, field: field)
      end
    end

    def pad8(x) = (x + 7) & ~7

    def padded(*parts)
      parts.each_with_index.map { |p, i| i == parts.size - 1 ? p : p + ("\0".b * (pad8(p.bytesize) - p.bytesize)) }.join.b
    end

    def usage_of(usage)
      return nil unless usage

      usage = usage.to_h
      { "prompt_tokens" => Integer(usage["prompt_tokens"] || usage[:prompt_tokens] || 0),
        "total_tokens" => Integer(usage["total_tokens"] || usage[:total_tokens] || 0) }
    end

    # ---------------------------------------------------------------- raw body (20.4)
    # [headers, body] of a ragged or sparse tensor: offsets, padding, (indices, padding,) data.
    def encode_raw(t, model: nil, usage: nil)
      model ||= t.model
      usage = usage_of(usage || t.usage)
      headers = { "Densewire-Version" => "1", "Densewire-Kind" => t.kind, "Densewire-Dtype" => t.dtype,
                  "Densewire-Shape" => "#{t.shape[0]},#{t.shape[1]}", "Densewire-Byteorder" => "little" }
      headers["Densewire-Model"] = model.to_s if model
      if usage
        headers["Densewire-Prompt-Tokens"] = usage["prompt_tokens"].to_s
        headers["Densewire-Total-Tokens"] = usage["total_tokens"].to_s
      end
      parts = [t.offsets.pack("V*")]
      parts << t.indices.pack("V*") if t.kind == "sparse"
      [headers, padded(*parts, t.data)]
    end

    # Decodes a raw body of +kind+ ("ragged" or "sparse") with its headers (SPEC.md 20.4).
    def decode_raw(body, headers, kind:)
      body = body.to_s.b
      get = Raw.header_reader(headers)
      raise InvalidFieldError.new("a #{kind} body says Densewire-Kind: #{kind}", field: "Densewire-Kind") unless get.call("Densewire-Kind") == kind

      name = get.call("Densewire-Dtype")
      raise InvalidFieldError.new("missing", field: "Densewire-Dtype") if name.nil?

      dtype = kind == "sparse" ? sparse_dtype!(name, "Densewire-Dtype") : Dtype.check!(name, field: "Densewire-Dtype")
      m = get.call("Densewire-Shape")&.match(/\A(0|[1-9][0-9]*),(0|[1-9][0-9]*)\z/)
      n, d = m && [m[1].to_i, m[2].to_i]
      if m.nil? || (kind == "sparse" && !d.between?(1, MAX_VOCABULARY))
        raise InvalidFieldError.new("must be n,d (n,V with V from 1 to 2^32 for sparse)", field: "Densewire-Shape")
      end
      order = get.call("Densewire-Byteorder")
      raise InvalidFieldError.new("must be little", field: "Densewire-Byteorder") unless order.nil? || order == "little"

      size = 4 * (n + 1)
      raise LengthMismatchError.new("the body is shorter than its #{size} bytes of offsets", offset: body.bytesize) if body.bytesize < size

      offsets = check_offsets!(body.byteslice(0, size), n)
      model = get.call("Densewire-Model")
      pt = get.call("Densewire-Prompt-Tokens")
      tt = get.call("Densewire-Total-Tokens")
      usage = pt || tt ? Usage.new(prompt_tokens: Raw.count(pt, "Densewire-Prompt-Tokens") || 0, total_tokens: Raw.count(tt, "Densewire-Total-Tokens") || 0) : nil
      k = offsets[-1]
      if kind == "ragged"
        start = pad8(size)
        rows = k * Dtype.row_bytes(dtype, d)
        Dtype.check_length!(body.bytesize, start + rows)
        return RaggedTensor.new(body.byteslice(start, rows), dtype: dtype, d: d, offsets: offsets, model: model, usage: usage)
      end
      indices_at = pad8(size)
      values_at = indices_at + pad8(4 * k)
      Dtype.check_length!(body.bytesize, values_at + k * Dtype.item_bytes(dtype))
      indices = body.byteslice(indices_at, 4 * k).unpack("V*")
      check_indices!(indices, offsets, d, base: indices_at)
      SparseTensor.new(body.byteslice(values_at, body.bytesize - values_at), dtype: dtype, vocabulary: d, offsets: offsets,
                                                                             indices: indices, model: model, usage: usage)
    end

    # ---------------------------------------------------------------- MessagePack (20.5)
    # The byte-exact body: model?, kind, dtype, shape, offsets, indices (sparse), data, usage?.
    def encode_msgpack(t, model: nil, usage: nil)
      model ||= t.model
      usage = usage_of(usage || t.usage)
      map = {}
      map["model"] = model.to_s.dup.force_encoding(Encoding::UTF_8) if model
      map["kind"] = t.kind.dup.force_encoding(Encoding::UTF_8)
      map["dtype"] = t.dtype.dup.force_encoding(Encoding::UTF_8)
      map["shape"] = t.shape
      map["offsets"] = t.offsets.pack("V*").b
      map["indices"] = t.indices.pack("V*").b if t.kind == "sparse"
      map["data"] = t.data.b
      map["usage"] = usage if usage
      Msgpack.library.pack(map)
    end

    def decode_msgpack(body, kind:)
      fields = Msgpack.read_fields(body)
      raise InvalidFieldError.new("a #{kind} body has kind #{kind.inspect}", field: "kind") unless fields["kind"] == kind

      dtype = fields["dtype"]
      raise InvalidFieldError.new("missing or not a str", field: "dtype") unless Msgpack.str?(dtype)

      dtype = kind == "sparse" ? sparse_dtype!(dtype) : Dtype.check!(dtype)
      shape = fields["shape"]
      unless shape.is_a?(Array) && shape.size == 2 && shape.all? { |x| x.is_a?(Integer) && x >= 0 }
        raise InvalidFieldError.new("missing or not two non-negative integers", field: "shape")
      end

      vocabulary!(shape[1], "shape") if kind == "sparse"
      offsets = check_offsets!(bin(fields, "offsets"), shape[0])
      model = Msgpack.str?(fields["model"]) ? fields["model"] : nil
      k = offsets[-1]
      if kind == "ragged"
        data = bin(fields, "data")
        Dtype.check_length!(data.bytesize, k * Dtype.row_bytes(dtype, shape[1]), field: "data")
        return RaggedTensor.new(data, dtype: dtype, d: shape[1], offsets: offsets, model: model, usage: Usage.parse(fields["usage"]))
      end
      ib = bin(fields, "indices")
      Dtype.check_length!(ib.bytesize, 4 * k, field: "indices")
      data = bin(fields, "data")
      Dtype.check_length!(data.bytesize, k * Dtype.item_bytes(dtype), field: "data")
      indices = ib.unpack("V*")
      check_indices!(indices, offsets, shape[1])
      SparseTensor.new(data, dtype: dtype, vocabulary: shape[1], offsets: offsets, indices: indices, model: model,
                             usage: Usage.parse(fields["usage"]))
    end

    def bin(fields, key)
      v = fields[key]
      raise InvalidFieldError.new("missing or not bin", field: key) unless v.is_a?(String) && v.encoding == Encoding::BINARY

      v
    end
  end
end
