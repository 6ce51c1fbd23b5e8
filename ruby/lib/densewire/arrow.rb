# frozen_string_literal: true

module Densewire
  # The Arrow IPC streaming body of SPEC.md section 10 (application/vnd.apache.arrow.stream): one
  # schema message, record batches, the end-of-stream marker. One non-nullable column "embedding":
  # FixedSizeList<item, d> of Float32 / Float16 / Float64 / Int8 / UInt8 (UInt16 for bfloat16 bits),
  # or FixedSizeBinary(ceil(d / 8)) for binary. Written and read here with a small FlatBuffers
  # reader and writer: no Arrow library is needed.
  module Arrow
    CONTINUATION = 0xFFFF_FFFF
    MESSAGE_SCHEMA = 1
    MESSAGE_RECORD_BATCH = 3
    TYPE_INT = 2
    TYPE_FLOAT = 3
    TYPE_FIXED_SIZE_BINARY = 15
    TYPE_FIXED_SIZE_LIST = 16
    METADATA_V5 = 4
    # dtype => [Arrow type id, type fields] of the list items
    ITEM_TYPES = {
      "float32" => [TYPE_FLOAT, { 0 => [:short, 1] }],
      "float16" => [TYPE_FLOAT, { 0 => [:short, 0] }],
      "float64" => [TYPE_FLOAT, { 0 => [:short, 2] }],
      "int8" => [TYPE_INT, { 0 => [:int, 8], 1 => [:bool, true] }],
      "uint8" => [TYPE_INT, { 0 => [:int, 8], 1 => [:bool, false] }],
      "bfloat16" => [TYPE_INT, { 0 => [:int, 16], 1 => [:bool, false] }],
    }.freeze

    module_function

    # ---------------------------------------------------------------- encoding
    # The stream for +tensor+ (or Embeddings, whose model, usage and quantization id go into the
    # schema metadata).
    def encode(tensor, model: nil, usage: nil, quantization: nil)
      if tensor.is_a?(Embeddings)
        model ||= tensor.model
        usage ||= tensor.usage
        quantization ||= tensor.quantization
        tensor = tensor.tensor
      end
      quantization = Quantization.check!(quantization)
      meta = { "densewire.version" => "1", "densewire.dtype" => tensor.dtype, "densewire.dimensions" => tensor.d.to_s }
      meta["densewire.model"] = model.to_s if model
      if usage
        usage = usage.to_h
        meta["densewire.prompt_tokens"] = Integer(usage["prompt_tokens"] || usage[:prompt_tokens] || 0).to_s
        meta["densewire.total_tokens"] = Integer(usage["total_tokens"] || usage[:total_tokens] || 0).to_s
      end
      meta["densewire.quantization"] = quantization if quantization
      schema = table(0 => [:short, METADATA_V5], 1 => [:ubyte, MESSAGE_SCHEMA],
                     2 => [:offset, table(1 => [:offset, [:tables, [embedding_field(tensor)]]],
                                          2 => [:offset, [:tables, key_values(meta)]])],
                     3 => [:long, 0])
      body = tensor.data + ("\0" * (-tensor.data.bytesize % 8))
      binary = tensor.dtype == "binary"
      nodes = binary ? [[tensor.n, 0]] : [[tensor.n, 0], [tensor.n * tensor.d, 0]]
      buffers = (binary ? [[0, 0]] : [[0, 0], [0, 0]]) + [[0, tensor.data.bytesize]]
      batch = table(0 => [:short, METADATA_V5], 1 => [:ubyte, MESSAGE_RECORD_BATCH],
                    2 => [:offset, table(0 => [:long, tensor.n],
                                         1 => [:offset, [:structs, nodes.flatten.pack("q<*"), nodes.size]],
                                         2 => [:offset, [:structs, buffers.flatten.pack("q<*"), buffers.size]])],
                    3 => [:long, body.bytesize])
      message(schema, "".b) << message(batch, body) << [CONTINUATION, 0].pack("L<l<")
    end

    def embedding_field(tensor)
      dtype_meta = [:offset, [:tables, key_values("densewire.dtype" => tensor.dtype)]]
      name = [:offset, [:string, "embedding"]]
      if tensor.dtype == "binary"
        return table(0 => name, 2 => [:ubyte, TYPE_FIXED_SIZE_BINARY],
                     3 => [:offset, table(0 => [:int, tensor.row_bytes])], 5 => [:offset, [:tables, []]], 6 => dtype_meta)
      end

      item_type, item_fields = ITEM_TYPES.fetch(tensor.dtype)
      item = table(0 => [:offset, [:string, "item"]], 2 => [:ubyte, item_type], 3 => [:offset, table(item_fields)],
                   5 => [:offset, [:tables, []]])
      table(0 => name, 2 => [:ubyte, TYPE_FIXED_SIZE_LIST], 3 => [:offset, table(0 => [:int, tensor.d])],
            5 => [:offset, [:tables, [item]]], 6 => dtype_meta)
    end

    def key_values(hash)
      hash.map { |k, v| table(0 => [:offset, [:string, k]], 1 => [:offset, [:string, v]]) }
    end

    def table(fields)
      [:table, fields]
    end

    # An encapsulated message: continuation, metadata length, FlatBuffer padded to 8, body.
    def message(root, body)
      fb = FlatBufferWriter.new.finish(root)
      fb << ("\0" * (-(fb.bytesize + 8) % 8))
      [CONTINUATION, fb.bytesize].pack("L<l<") << fb << body
    end

    # Writes FlatBuffers front to back: a table's vtable just before it, the objects it points to
    # after it (uoffsets point forward), every scalar aligned to its size.
    class FlatBufferWriter
      SIZES = { bool: 1, ubyte: 1, short: 2, int: 4, long: 8, offset: 4 }.freeze
      PACK = { bool: "C", ubyte: "C", short: "s<", int: "l<", long: "q<" }.freeze

      def initialize
        @buf = +"".b
      end

      def finish(root)
        @buf << "\0\0\0\0"
        at = emit(root)
        @buf[0, 4] = [at].pack("L<")
        @buf
      end

      private

      def pad_to(align, extra = 0)
        @buf << ("\0" * (-(@buf.bytesize + extra) % align))
      end

      def emit(obj)
        kind, value, count = obj
        case kind
        when :table then emit_table(value)
        when :string
          pad_to(4)
          at = @buf.bytesize
          @buf << [value.bytesize].pack("L<") << value.b << "\0"
          at
        when :structs # value: packed 16-byte structs of two longs
          pad_to(8, 4)
          at = @buf.bytesize
          @buf << [count].pack("L<") << value
          at
        when :tables
          pad_to(4)
          at = @buf.bytesize
          @buf << [value.size].pack("L<") << ("\0" * (4 * value.size))
          value.each_with_index { |t, i| patch(at + 4 + 4 * i, emit(t)) }
          at
        end
      end

      def emit_table(fields)
        ids = fields.keys.sort
        # Inline layout after the 4-byte vtable offset: largest fields first.
        layout = {}
        size = 4
        ids.sort_by { |id| [-SIZES[fields[id][0]], id] }.each do |id|
          width = SIZES[fields[id][0]]
          size += -size % width
          layout[id] = size
          size += width
        end
        align = fields.values.any? { |(k, _)| k == :long } ? 8 : 4
        size += -size % align
        slots = ids.empty? ? 0 : ids.max + 1
        vtable = [4 + 2 * slots, size] + Array.new(slots) { |id| layout[id] || 0 }
        vtable_bytes = vtable.pack("S<*")
        pad_to(align, vtable_bytes.bytesize)
        @buf << vtable_bytes
        at = @buf.bytesize
        inline = ("\0" * size).b
        inline[0, 4] = [vtable_bytes.bytesize].pack("l<")
        ids.each do |id|
          kind, value = fields[id]
          next if kind == :offset

          inline[layout[id], SIZES[kind]] = [kind == :bool ? (value ? 1 : 0) : value].pack(PACK[kind])
        end
        @buf << inline
        ids.each { |id| patch(at + layout[id], emit(fields[id][1])) if fields[id][0] == :offset }
        at
      end

      def patch(field_at, target)
        @buf[field_at, 4] = [target - field_at].pack("L<")
      end
    end

    # ---------------------------------------------------------------- decoding
    # Decodes a stream into Embeddings (model, usage and quantization id from the schema metadata
    # when present).
    def decode(body)
      body = body.to_s.b
      schema = nil
      chunks = []
      rows = 0
      each_message(body) do |fb, msg, type, payload, at|
        case type
        when MESSAGE_SCHEMA
          raise MalformedError.new("a second schema message", offset: at) if schema

          schema = read_schema(fb, fb.table(msg, 2))
        when MESSAGE_RECORD_BATCH
          raise MalformedError.new("a record batch before the schema", offset: at) unless schema

          n, data = read_batch(fb, fb.table(msg, 2), payload, schema, at)
          rows += n
          chunks << data
        else raise MalformedError.new("unsupported Arrow message type #{type}", offset: at)
        end
      end
      raise TruncatedError.new("the stream ends before its schema", offset: body.bytesize) unless schema

      tensor = Tensor.new(chunks.join.b, dtype: schema[:dtype], shape: [rows, schema[:d]])
      Embeddings.new(tensor, model: schema[:model], usage: schema[:usage],
                             quantization: schema[:quantization])
    end

    # Yields each message of a stream (its FlatBuffer, root table, header type, body bytes and offset),
    # the framing checked as SPEC.md section 10 says; a stream may end without the end-of-stream marker.
    def each_message(body)
      pos = 0
      loop do
        break if pos == body.bytesize

        at = pos
        len, pos = read_prefix(body, pos)
        break if len.zero?

        need(body, pos + len, at)
        fb = FlatBuffer.new(body, pos, len)
        pos += len
        msg = fb.root
        body_len = fb.scalar(msg, 3, "q<", 0)
        raise MalformedError.new("negative body length", offset: at) if body_len.negative?

        need(body, pos + body_len, at)
        yield fb, msg, fb.scalar(msg, 1, "C", 0), body.byteslice(pos, body_len), at
        pos += body_len
      end
    end

    def read_prefix(body, pos)
      need(body, pos + 4, pos)
      len = body.byteslice(pos, 4).unpack1("L<")
      pos += 4
      if len == CONTINUATION
        need(body, pos + 4, pos)
        len = body.byteslice(pos, 4).unpack1("l<")
        pos += 4
      end
      raise MalformedError.new("negative message length", offset: pos - 4) if len.negative?

      [len, pos]
    end

    def need(body, upto, _at)
      raise TruncatedError.new("the stream ends early", offset: body.bytesize) if upto > body.bytesize
    end

    def read_schema(fb, schema)
      fields = fb.tables(schema, 1)
      fields.each_with_index do |f, k|
        name = fb.string(f, 0)
        raise MalformedError.new("column #{k}'s name is not valid UTF-8", field: "columns[#{k}]") if name && !name.valid_encoding?
      end
      meta = fb.key_values(schema, 2)
      Dtype.check_no_kind!(meta, "densewire.kind")
      unless fields.size == 1 && fb.string(fields[0], 0) == "embedding"
        raise InvalidFieldError.new("the schema must have the one column \"embedding\"", field: "embedding")
      end

      field = fields[0]
      field_meta = fb.key_values(field, 6)
      type_id = fb.scalar(field, 2, "C", 0)
      type = fb.table(field, 3)
      name = field_meta["densewire.dtype"] || meta["densewire.dtype"]
      dtype = name && Dtype.check!(name, field: "densewire.dtype")
      case type_id
      when TYPE_FIXED_SIZE_LIST
        d = fb.scalar(type, 0, "l<", 0)
        item = fb.tables(field, 5).first or raise InvalidFieldError.new("list without an item field", field: "embedding")
        found = item_dtype(fb, fb.scalar(item, 2, "C", 0), fb.table(item, 3), dtype)
        dtype ||= found
        raise InvalidFieldError.new("item type does not hold #{dtype}", field: "embedding") unless found == dtype
      when TYPE_FIXED_SIZE_BINARY
        raise InvalidFieldError.new("FixedSizeBinary holds binary, not #{dtype}", field: "embedding") if dtype && dtype != "binary"

        dtype = "binary"
        width = fb.scalar(type, 0, "l<", 0)
        d = meta.key?("densewire.dimensions") ? count(meta, "densewire.dimensions") : 8 * width
        unless Dtype.row_bytes("binary", d) == width
          raise InvalidFieldError.new("FixedSizeBinary(#{width}) cannot hold #{d} bits", field: "densewire.dimensions")
        end
      else
        raise InvalidFieldError.new("Arrow type #{type_id} is not FixedSizeList or FixedSizeBinary", field: "embedding")
      end
      raise InvalidFieldError.new("negative list size #{d}", field: "embedding") if d.negative?
      usage = if meta.key?("densewire.prompt_tokens") || meta.key?("densewire.total_tokens")
                Usage.new(prompt_tokens: meta.key?("densewire.prompt_tokens") ? count(meta, "densewire.prompt_tokens") : nil,
                          total_tokens: meta.key?("densewire.total_tokens") ? count(meta, "densewire.total_tokens") : nil)
              end
      { dtype: dtype, d: d, model: meta["densewire.model"], usage: usage, quantization: meta["densewire.quantization"] }
    end

    # A metadata value that must be a decimal count (SPEC.md section 10): "6.4e1" or "many" is
    # invalid_field on its key, not a default.
    def count(meta, key)
      value = meta[key]
      raise InvalidFieldError.new("must be a decimal count, got #{value.inspect}", field: key) unless value.to_s.match?(/\A[0-9]+\z/)

      Integer(value, 10)
    end

    def item_dtype(fb, type_id, type, declared)
      case type_id
      when TYPE_FLOAT then { 0 => "float16", 1 => "float32", 2 => "float64" }[fb.scalar(type, 0, "s<", 0)]
      when TYPE_INT
        bits = fb.scalar(type, 0, "l<", 0)
        signed = fb.scalar(type, 1, "C", 0) == 1
        return (signed ? "int8" : "uint8") if bits == 8
        return "bfloat16" if bits == 16 && !signed && declared == "bfloat16"

        raise InvalidFieldError.new("Int(#{bits}) items need densewire.dtype bfloat16", field: "embedding")
      end
    end

    def read_batch(fb, batch, payload, schema, at)
      raise MalformedError.new("compressed record batches are not supported", offset: at) if fb.present?(batch, 3)

      n = fb.scalar(batch, 0, "q<", 0)
      raise MalformedError.new("negative row count #{n}", offset: at) if n.negative?
      nodes = fb.structs(batch, 1).each_slice(2).to_a
      buffers = fb.structs(batch, 2).each_slice(2).to_a
      if nodes.any? { |(_, nulls)| nulls != 0 }
        raise InvalidFieldError.new("the embedding column must not hold nulls", field: "embedding")
      end

      raise MalformedError.new("record batch without buffers", offset: at) if buffers.empty?

      offset, length = buffers.last
      expected = n * Dtype.row_bytes(schema[:dtype], schema[:d])
      if offset.negative? || length.negative? || offset + length > payload.bytesize
        raise MalformedError.new("a buffer lies outside the message body", offset: at)
      end
      if length < expected # SPEC.md section 10: a buffer shorter than the batch's row count needs is malformed
        raise MalformedError.new("the embedding buffer holds #{length} bytes, #{n} rows need #{expected}", offset: at)
      end
      [n, payload.byteslice(offset, expected)]
    end

    # Reads FlatBuffers within body[start, len]; any reference outside it is +malformed+.
    class FlatBuffer
      def initialize(body, start, len)
        @body = body
        @start = start
        @end = start + len
      end

      def root
        deref(@start)
      end

      def scalar(table, id, directive, default)
        at = field_at(table, id)
        at ? read(at, directive, width(directive)) : default
      end

      def present?(table, id)
        !field_at(table, id).nil?
      end

      def table(table, id)
        at = field_at(table, id) or raise MalformedError.new("a required table is missing", offset: table)
        deref(at)
      end

      def string(table, id)
        at = field_at(table, id) or return nil
        s = deref(at)
        len = read(s, "L<", 4)
        check(s + 4, len)
        @body.byteslice(s + 4, len).force_encoding(Encoding::UTF_8)
      end

      def tables(table, id)
        at = field_at(table, id) or return []
        v = deref(at)
        count = read(v, "L<", 4)
        check(v + 4, 4 * count)
        Array.new(count) { |i| deref(v + 4 + 4 * i) }
      end

      # A vector of 16-byte structs of two longs, flattened.
      def structs(table, id)
        at = field_at(table, id) or return []
        v = deref(at)
        count = read(v, "L<", 4)
        check(v + 4, 16 * count)
        @body.byteslice(v + 4, 16 * count).unpack("q<*")
      end

      # Custom metadata: keys and values are UTF-8 strings, or the stream is malformed (found by
      # comparing the decoders on fuzzed bodies: a mangled densewire.dtype went unread here).
      def key_values(table, id)
        tables(table, id).to_h do |kv|
          key, value = string(kv, 0), string(kv, 1)
          [key, value].each do |s|
            raise MalformedError.new("Arrow metadata #{key.to_s.b.inspect} is not valid UTF-8", field: "metadata") if s && !s.valid_encoding?
          end
          [key, value]
        end
      end

      private

      def width(directive)
        { "C" => 1, "s<" => 2, "S<" => 2, "l<" => 4, "L<" => 4, "q<" => 8 }.fetch(directive)
      end

      def check(at, len)
        return if at >= @start && len >= 0 && at + len <= @end

        raise MalformedError.new("FlatBuffer reference out of bounds", offset: at.clamp(0, @body.bytesize))
      end

      def read(at, directive, len)
        check(at, len)
        @body.byteslice(at, len).unpack1(directive)
      end

      def deref(at)
        at + read(at, "L<", 4)
      end

      def field_at(table, id)
        vtable = table - read(table, "l<", 4)
        vt_size = read(vtable, "S<", 2)
        return nil if 4 + 2 * id + 2 > vt_size

        off = read(vtable + 4 + 2 * id, "S<", 2)
        off.zero? ? nil : table + off
      end
    end
  end
end
