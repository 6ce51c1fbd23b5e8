# frozen_string_literal: true

module Densewire
  # The raw body of SPEC.md section 7 (application/octet-stream): the tensor's little-endian bytes,
  # described by Densewire-* headers.
  module Raw
    SHAPE = /\A(\d+),(\d+)\z/.freeze

    module_function

    # Returns [headers, body] for +tensor+ (a Tensor, or Embeddings whose model, usage and
    # quantization are used). +model+, +usage+ and +quantization+ (int8/uint8 rows' ranges id) add
    # the embeddings-response headers.
    def encode(tensor, model: nil, usage: nil, quantization: nil)
      if tensor.is_a?(Embeddings)
        model ||= tensor.model
        usage ||= tensor.usage
        quantization ||= tensor.quantization
        tensor = tensor.tensor
      end
      quantization = Quantization.check!(quantization)
      headers = {
        "Densewire-Version" => "1",
        "Densewire-Dtype" => tensor.dtype,
        "Densewire-Shape" => "#{tensor.n},#{tensor.d}",
        "Densewire-Byteorder" => "little",
      }
      headers["Densewire-Model"] = model.to_s if model
      if usage
        usage = usage.to_h
        headers["Densewire-Prompt-Tokens"] = Integer(usage["prompt_tokens"] || usage[:prompt_tokens] || 0).to_s
        headers["Densewire-Total-Tokens"] = Integer(usage["total_tokens"] || usage[:total_tokens] || 0).to_s
      end
      headers["Densewire-Quantization"] = quantization if quantization
      [headers, tensor.data]
    end

    # Decodes +body+ with its +headers+: a Hash (any key case) or anything answering [] with
    # case-insensitive names, such as a Net::HTTPResponse. Returns Embeddings.
    def decode(body, headers)
      get = header_reader(headers)
      kind = get.call("Densewire-Kind")
      Dtype.check_no_kind!({ "Densewire-Kind" => kind }.compact, "Densewire-Kind")
      dtype_name = get.call("Densewire-Dtype")
      raise InvalidFieldError.new("missing header", field: "Densewire-Dtype") if dtype_name.nil?

      dtype = Dtype.check!(dtype_name, field: "Densewire-Dtype")
      shape_text = get.call("Densewire-Shape")
      raise InvalidFieldError.new("missing header", field: "Densewire-Shape") if shape_text.nil?
      unless (m = SHAPE.match(shape_text))
        raise InvalidFieldError.new("must be n,d in decimal with no spaces, got #{shape_text.inspect}", field: "Densewire-Shape")
      end

      byteorder = get.call("Densewire-Byteorder")
      if byteorder && byteorder != "little"
        raise InvalidFieldError.new("raw bodies are little-endian, got #{byteorder.inspect}", field: "Densewire-Byteorder")
      end

      shape = [m[1].to_i, m[2].to_i]
      body = body.to_s.b
      expected = shape[0] * Dtype.row_bytes(dtype, shape[1])
      Dtype.check_length!(body.bytesize, expected)

      Embeddings.new(Tensor.new(body, dtype: dtype, shape: shape), model: get.call("Densewire-Model"), usage: usage(get),
                                                                   quantization: get.call("Densewire-Quantization"))
    end

    def usage(get)
      prompt = get.call("Densewire-Prompt-Tokens")
      total = get.call("Densewire-Total-Tokens")
      return nil if prompt.nil? && total.nil?

      Usage.new(prompt_tokens: count(prompt, "Densewire-Prompt-Tokens"), total_tokens: count(total, "Densewire-Total-Tokens"))
    end

    def count(text, name)
      return nil if text.nil?
      raise InvalidFieldError.new("must be a decimal integer, got #{text.inspect}", field: name) unless text.match?(/\A\d+\z/)

      text.to_i
    end

    def header_reader(headers)
      if headers.is_a?(Hash)
        lower = headers.to_h { |k, v| [k.to_s.downcase, v.is_a?(Array) ? v.first : v] }
        ->(name) { lower[name.downcase]&.to_s&.strip }
      else
        ->(name) { headers[name]&.to_s&.strip }
      end
    end
  end
end
