# frozen_string_literal: true

require "json"

module Densewire
  # The Open Inference Protocol (KServe v2) and its binary tensor data extension (SPEC.md section 19,
  # "Open Inference Protocol"): a response is a JSON object alone, or a JSON header of
  # Inference-Header-Content-Length bytes followed by the blobs of the outputs that have
  # parameters.binary_data_size, in output order.
  #
  #   response = Densewire::KServe.decode(body, headers)
  #   response.outputs["embedding"].tensor     # => Densewire::Tensor
  #   response.embeddings("embedding")         # => Densewire::Embeddings (model, quantization id)
  #
  # A blob's tensor holds body.byteslice(...) (which MRI shares with the body rather than copying);
  # a BYTES output gives its elements as binary Strings.
  module KServe
    HEADER_LENGTH = "Inference-Header-Content-Length"
    # KServe datatype -> densewire dtype (SPEC.md 19.1); BYTES is text, not a tensor dtype.
    DATATYPES = { "FP32" => "float32", "FP16" => "float16", "BF16" => "bfloat16", "FP64" => "float64",
                  "INT8" => "int8", "UINT8" => "uint8" }.freeze
    # KServe datatypes densewire has no dtype for (unknown_dtype when read).
    OTHER_DATATYPES = %w[BOOL INT16 INT32 INT64 UINT16 UINT32 UINT64].freeze
    # The largest shape entry a reader takes (SPEC.md 19.2).
    MAX_SHAPE_ENTRY = (2**31) - 1
    INT_RANGE = { "int8" => -128..127, "uint8" => 0..255 }.freeze

    # One output: +tensor+ for every datatype but BYTES, +elements+ (binary Strings) for BYTES;
    # +binary+: it came as a blob. +shape+ as sent ([n, d], or [d] for the tensor (1, d)).
    Output = Struct.new(:name, :datatype, :shape, :parameters, :binary, :tensor, :elements, keyword_init: true) do
      # parameters["quantization"]: the id of an INT8/UINT8 output's ranges (SPEC.md 17.4), or nil.
      def quantization
        parameters["quantization"]
      end
    end

    # A response: its outputs by name, in order, and model_name, model_version, id as sent (or nil).
    Response = Struct.new(:outputs, :model_name, :model_version, :id, :parameters, keyword_init: true) do
      # The output +name+ as Densewire::Embeddings (the model name and its quantization id);
      # InvalidFieldError on "outputs" when there is no tensor output of that name.
      def embeddings(name = "embedding")
        out = outputs[name]
        unless out&.tensor
          raise InvalidFieldError.new("no tensor output #{name.inspect}; the response has #{outputs.keys.join(", ")}",
                                      field: "outputs")
        end
        Embeddings.new(out.tensor, model: model_name, quantization: out.quantization)
      end
    end

    module_function

    # The densewire dtype of a KServe datatype; UnknownDtypeError on +field+ for BYTES and any other string.
    def dtype_of(datatype, field = "datatype")
      DATATYPES.fetch(datatype) { raise unknown_datatype(datatype, field) }
    end

    # Reads a KServe v2 inference response (SPEC.md 19.3) given its HTTP headers (a Hash, any case).
    # Errors, the first in the spec's order, with the offset and field it gives.
    def decode(body, headers = {})
      body = body.b
      length = header_length(headers, body.bytesize)
      raise MalformedError.new("a response has a JSON header; #{HEADER_LENGTH} is 0", offset: 0, field: HEADER_LENGTH) if length&.zero?

      length ||= body.bytesize
      doc = parse_header(body.byteslice(0, length))
      specs = output_specs(doc["outputs"])
      pos = length
      outputs = {}
      specs.each do |f, out, size, o|
        raise InvalidFieldError.new("has both data and parameters.binary_data_size", field: "#{f}.data") if size && o.key?("data")
        raise InvalidFieldError.new("has neither data nor parameters.binary_data_size", field: "#{f}.data") if !size && !o.key?("data")

        if size
          read_blob(out, f, body, pos, size)
          pos += size
        else
          read_json(out, "#{f}.data", o["data"])
        end
        outputs[out.name] = out
      end
      raise MalformedError.new("#{body.bytesize - pos} bytes after the last tensor", offset: pos) if pos != body.bytesize

      Response.new(outputs: outputs, model_name: string(doc["model_name"]), model_version: string(doc["model_version"]),
                   id: string(doc["id"]), parameters: doc["parameters"].is_a?(Hash) ? doc["parameters"] : {})
    end

    def header_length(headers, body_size)
      value = (headers || {}).find { |k, _| k.to_s.casecmp?(HEADER_LENGTH) }&.last
      value = value.first if value.is_a?(Array)
      return nil if value.nil?

      text = value.to_s.strip
      raise InvalidFieldError.new("must be a decimal byte count, got #{value.inspect[0, 40]}", field: HEADER_LENGTH) unless text.match?(/\A[0-9]+\z/)

      n = text.to_i
      if n > body_size
        raise TruncatedError.new("the JSON header is #{n} bytes but the body has only #{body_size}", offset: body_size,
                                                                                                      field: HEADER_LENGTH)
      end
      n
    end

    def parse_header(bytes)
      text = bytes.force_encoding(Encoding::UTF_8)
      raise MalformedError, "the inference header is not UTF-8" unless text.valid_encoding?

      doc = begin
        JSON.parse(text)
      rescue JSON::ParserError => e
        raise MalformedError, "the inference header is not valid JSON: #{e.message[0, 120]}"
      end
      raise MalformedError.new("the inference header must be a JSON object, got #{kind(doc)}", offset: 0) unless doc.is_a?(Hash)

      doc
    end

    # SPEC.md 19.3 step 3: [field, Output, binary_data_size or nil, the output's JSON object] per output.
    def output_specs(list)
      raise InvalidFieldError.new("must be an array of outputs, got #{kind(list)}", field: "outputs") unless list.is_a?(Array)

      list.each_with_index.map do |o, i|
        f = "outputs[#{i}]"
        raise InvalidFieldError.new("must be an object, got #{kind(o)}", field: f) unless o.is_a?(Hash)
        raise InvalidFieldError.new("must be a string, got #{kind(o["name"])}", field: "#{f}.name") unless o["name"].is_a?(String)

        datatype = o["datatype"]
        raise InvalidFieldError.new("must be a string, got #{kind(datatype)}", field: "#{f}.datatype") unless datatype.is_a?(String)

        params = o["parameters"] || {}
        raise InvalidFieldError.new("must be an object, got #{kind(params)}", field: "#{f}.parameters") unless params.is_a?(Hash)

        size = params["binary_data_size"]
        unless size.nil? || (size.is_a?(Integer) && size >= 0 && size < 2**53) # SPEC.md 19.3: 0 to 2^53 - 1
          raise InvalidFieldError.new("must be a non-negative integer, got #{size.inspect[0, 40]}", field: "#{f}.parameters.binary_data_size")
        end
        raise unknown_datatype(datatype, "#{f}.datatype") unless datatype == "BYTES" || DATATYPES.key?(datatype)

        shape = o["shape"]
        tensor = datatype != "BYTES"
        unless shape.is_a?(Array) && shape.all? { |s| s.is_a?(Integer) && s >= 0 && (!tensor || s <= MAX_SHAPE_ENTRY) } && (!tensor || [1, 2].include?(shape.size))
          raise InvalidFieldError.new("must be an array of #{tensor ? "one or two " : ""}non-negative integers up to 2^31-1, got #{shape.inspect[0, 60]}",
                                      field: "#{f}.shape")
        end
        q = params["quantization"]
        raise InvalidFieldError.new("must be a string, got #{kind(q)}", field: "#{f}.parameters.quantization") unless q.nil? || q.is_a?(String)

        [f, Output.new(name: o["name"], datatype: datatype, shape: shape, parameters: params, binary: !size.nil?), size, o]
      end
    end

    def read_blob(out, f, body, pos, size)
      size_field = "#{f}.parameters.binary_data_size"
      if size > body.bytesize - pos
        raise TruncatedError.new("a blob of #{size} bytes at offset #{pos} runs past the end of the #{body.bytesize}-byte body",
                                 offset: body.bytesize, field: size_field)
      end
      if out.datatype == "BYTES"
        out.elements = bytes_elements(body, pos, size, f)
        count = out.shape.reduce(1, :*)
        raise ShapeMismatchError.new("#{out.elements.size} BYTES elements, the shape #{out.shape} holds #{count}", field: f) if out.elements.size != count

        return
      end
      dtype = DATATYPES.fetch(out.datatype)
      n, d = nd(out.shape)
      expected = n * Dtype.row_bytes(dtype, d)
      if size != expected
        raise LengthMismatchError.new("a blob of #{size} bytes where the shape #{out.shape} of #{out.datatype} needs #{expected}",
                                      offset: pos + [size, expected].min, field: size_field)
      end
      out.tensor = Tensor.new(body.byteslice(pos, size), dtype: dtype, shape: [n, d])
    end

    def bytes_elements(body, start, size, field)
      out = []
      pos = start
      stop = start + size
      while pos < stop
        left = stop - pos
        raise MalformedError.new("a BYTES element length needs 4 bytes, #{left} left in the tensor", offset: pos, field: field) if left < 4

        n = body.unpack1("V", offset: pos)
        raise MalformedError.new("a BYTES element of #{n} bytes runs past the end of its tensor", offset: pos, field: field) if n > left - 4

        out << body.byteslice(pos + 4, n)
        pos += 4 + n
      end
      out
    end

    def read_json(out, field, data)
      raise InvalidFieldError.new("must be an array, got #{kind(data)}", field: field) unless data.is_a?(Array)

      values = data.flatten
      count = out.shape.reduce(1, :*)
      raise ShapeMismatchError.new("#{values.size} elements, the shape #{out.shape} holds #{count}", field: field) if values.size != count

      if out.datatype == "BYTES"
        out.elements = values.each_with_index.map do |v, j|
          raise InvalidFieldError.new("must be a string, got #{kind(v)}", field: "#{field}[#{j}]") unless v.is_a?(String)

          v.b
        end
        return
      end
      dtype = DATATYPES.fetch(out.datatype)
      range = INT_RANGE[dtype]
      values = values.each_with_index.map do |v, j|
        v = v.to_i if range && v.is_a?(Float) && v.finite? && v == v.floor # 3.0 is the integer 3 (SPEC.md 3.5)
        ok = range ? v.is_a?(Integer) && range.cover?(v) : v.is_a?(Numeric)
        raise InvalidFieldError.new("#{v.inspect[0, 40]} is not a #{range ? "#{dtype} (#{range})" : "number"}", field: "#{field}[#{j}]") unless ok

        v
      end
      out.tensor = Tensor.from_values(values, dtype: dtype, shape: nd(out.shape))
    end

    def nd(shape)
      shape.size == 1 ? [1, shape[0]] : shape
    end

    def unknown_datatype(datatype, field)
      known = "#{DATATYPES.keys.join(", ")} or BYTES"
      if OTHER_DATATYPES.include?(datatype)
        UnknownDtypeError.new("#{datatype} has no densewire dtype; expected one of #{known}", field: field)
      else
        UnknownDtypeError.new("unknown datatype #{datatype.inspect[0, 40]}; expected one of #{known}", field: field)
      end
    end

    def string(value)
      value.is_a?(String) ? value : nil
    end

    def kind(value)
      case value
      when nil then "null"
      when true, false then "a boolean"
      when String then "a string"
      when Numeric then "a number"
      when Array then "an array"
      when Hash then "an object"
      else value.class.name
      end
    end
  end
end
