# frozen_string_literal: true

module Densewire
  # Ragged and sparse tensors as Arrow IPC streams (SPEC.md 20.7), with Densewire::Arrow's
  # FlatBuffers reader and writer: one non-nullable column "embedding", List<FixedSizeList<T, d>> (or
  # List<FixedSizeBinary>) for a ragged tensor, Struct<indices: List<UInt32>, values: List<T>> with
  # densewire.vocabulary_size for a sparse one, densewire.kind in the schema metadata.
  module Kinds
    TYPE_LIST = 12
    TYPE_STRUCT = 13

    module_function

    def arrow_field(name, type_id, type_fields, children, metadata = nil)
      fields = { 0 => [:offset, [:string, name]], 2 => [:ubyte, type_id], 3 => [:offset, Arrow.table(type_fields)],
                 5 => [:offset, [:tables, children]] }
      fields[6] = [:offset, [:tables, Arrow.key_values(metadata)]] if metadata
      Arrow.table(fields)
    end

    def arrow_item(dtype)
      type_id, type_fields = Arrow::ITEM_TYPES.fetch(dtype)
      arrow_field("item", type_id, type_fields, [])
    end

    # [FlatBuffers field, nodes, buffers (as [bytes] or nil for an absent validity)] of the column.
    def arrow_column(t)
      n = t.shape[0]
      offsets = t.offsets.pack("l<*")
      if t.kind == "ragged"
        rows = t.offsets[-1]
        d = t.shape[1]
        inner = if t.dtype == "binary"
                  arrow_field("item", Arrow::TYPE_FIXED_SIZE_BINARY, { 0 => [:int, Dtype.row_bytes("binary", d)] }, [])
                else
                  arrow_field("item", Arrow::TYPE_FIXED_SIZE_LIST, { 0 => [:int, d] }, [arrow_item(t.dtype)])
                end
        field = arrow_field("embedding", TYPE_LIST, {}, [inner], "densewire.dtype" => t.dtype)
        nodes = t.dtype == "binary" ? [n, rows] : [n, rows, rows * d]
        buffers = t.dtype == "binary" ? [nil, offsets, nil, t.data] : [nil, offsets, nil, nil, t.data]
        return [field, nodes, buffers]
      end
      k = t.offsets[-1]
      indices = arrow_field("indices", TYPE_LIST, {}, [arrow_field("item", Arrow::TYPE_INT, { 0 => [:int, 32], 1 => [:bool, false] }, [])])
      values = arrow_field("values", TYPE_LIST, {}, [arrow_item(t.dtype)])
      field = arrow_field("embedding", TYPE_STRUCT, {}, [indices, values],
                          "densewire.dtype" => t.dtype, "densewire.vocabulary_size" => t.shape[1].to_s)
      [field, [n, n, k, n, k], [nil, nil, offsets, nil, t.indices.pack("V*"), nil, offsets, nil, t.data]]
    end

    # The stream of a ragged or sparse tensor: schema, one record batch, end-of-stream.
    def encode_arrow(t, model: nil, usage: nil)
      model ||= t.model
      usage = usage_of(usage || t.usage)
      meta = { "densewire.version" => "1", "densewire.kind" => t.kind, "densewire.dtype" => t.dtype,
               "densewire.dimensions" => t.shape[1].to_s }
      meta["densewire.model"] = model.to_s if model
      if usage
        meta["densewire.prompt_tokens"] = usage["prompt_tokens"].to_s
        meta["densewire.total_tokens"] = usage["total_tokens"].to_s
      end
      field, nodes, buffers = arrow_column(t)
      schema = Arrow.table(0 => [:short, Arrow::METADATA_V5], 1 => [:ubyte, Arrow::MESSAGE_SCHEMA],
                           2 => [:offset, Arrow.table(1 => [:offset, [:tables, [field]]], 2 => [:offset, [:tables, Arrow.key_values(meta)]])],
                           3 => [:long, 0])
      body = +"".b
      specs = buffers.map do |b|
        next [0, 0] if b.nil?

        at = body.bytesize
        body << b << ("\0" * (-b.bytesize % 8))
        [at, b.bytesize]
      end
      batch = Arrow.table(0 => [:short, Arrow::METADATA_V5], 1 => [:ubyte, Arrow::MESSAGE_RECORD_BATCH],
                          2 => [:offset, Arrow.table(0 => [:long, t.shape[0]],
                                                     1 => [:offset, [:structs, nodes.flat_map { |x| [x, 0] }.pack("q<*"), nodes.size]],
                                                     2 => [:offset, [:structs, specs.flatten.pack("q<*"), specs.size]])],
                          3 => [:long, body.bytesize])
      Arrow.message(schema, "".b) << Arrow.message(batch, body) << [Arrow::CONTINUATION, 0].pack("L<l<")
    end

    # The messages of a stream: [FlatBuffer, schema table, [[FlatBuffer, batch table, body, offset]...]].
    def arrow_messages(body)
      schema = nil
      batches = []
      Arrow.each_message(body) do |fb, msg, type, payload, at|
        case type
        when Arrow::MESSAGE_SCHEMA
          raise MalformedError.new("a second schema message", offset: at) if schema

          schema = [fb, fb.table(msg, 2)]
        when Arrow::MESSAGE_RECORD_BATCH
          raise MalformedError.new("a record batch before the schema", offset: at) unless schema

          batches << [fb, fb.table(msg, 2), payload, at]
        else raise MalformedError.new("unsupported Arrow message type #{type}", offset: at)
        end
      end
      raise TruncatedError.new("the stream ends before its schema", offset: body.bytesize) unless schema
      raise TruncatedError.new("the stream has no record batch", offset: body.bytesize) if batches.empty?

      [schema, batches]
    end

    # Reads a batch's nodes and buffers in order (the column's fields depth first).
    class ArrowBatch
      def initialize(fb, batch, payload, at)
        raise MalformedError.new("compressed record batches are not supported", offset: at) if fb.present?(batch, 3)

        @n = fb.scalar(batch, 0, "q<", 0)
        @nodes = fb.structs(batch, 1).each_slice(2).to_a
        @buffers = fb.structs(batch, 2).each_slice(2).to_a
        @payload = payload
        @at = at
        raise InvalidFieldError.new("the embedding column must not hold nulls", field: "embedding") if @nodes.any? { |(_, nulls)| nulls != 0 }
      end

      attr_reader :n

      def node
        (@nodes.shift or raise MalformedError.new("a record batch has fewer nodes than its column", offset: @at)).first
      end

      def buffer(min_bytes = 0)
        spec = @buffers.shift or raise MalformedError.new("a record batch has fewer buffers than its column", offset: @at)
        offset, length = spec
        if offset.negative? || length.negative? || offset + length > @payload.bytesize || length < min_bytes
          raise MalformedError.new("a buffer lies outside the message body or is shorter than its column needs", offset: @at)
        end
        @payload.byteslice(offset, length)
      end

      # A List node: its offsets (rebased to 0) and the [first, last) items of its child.
      def list
        len = node
        buffer
        offs = buffer(4 * (len + 1)).unpack("l<#{len + 1}")
        raise MalformedError.new("list offsets decrease", offset: @at) if offs.each_cons(2).any? { |a, b| b < a } || offs[0].negative?

        [offs.map { |o| o - offs[0] }, offs[0], offs[-1]]
      end

      # A primitive (or FixedSizeBinary) node of +width+-byte items: its items [first, last).
      def values(width, first, last)
        len = node
        buffer
        data = buffer(len * width)
        raise MalformedError.new("list offsets past the end of their values", offset: @at) if last > len

        data.byteslice(first * width, (last - first) * width)
      end
    end

    def decode_arrow(body, kind:)
      body = body.to_s.b
      (sfb, schema), batches = arrow_messages(body)
      fields = sfb.tables(schema, 1)
      meta = sfb.key_values(schema, 2)
      raise InvalidFieldError.new("a #{kind} stream has densewire.kind #{kind}", field: "densewire.kind") unless meta["densewire.kind"] == kind
      raise InvalidFieldError.new("the schema must have the one column \"embedding\"", field: "embedding") unless fields.size == 1 && sfb.string(fields[0], 0) == "embedding"

      field = fields[0]
      field_meta = sfb.key_values(field, 6)
      name = field_meta["densewire.dtype"] || meta["densewire.dtype"]
      model = meta["densewire.model"]
      usage = if meta.key?("densewire.prompt_tokens") || meta.key?("densewire.total_tokens")
                Usage.new(prompt_tokens: meta.key?("densewire.prompt_tokens") ? Arrow.count(meta, "densewire.prompt_tokens") : 0,
                          total_tokens: meta.key?("densewire.total_tokens") ? Arrow.count(meta, "densewire.total_tokens") : 0)
              end
      type_id = sfb.scalar(field, 2, "C", 0)
      children = sfb.tables(field, 5)
      if kind == "ragged"
        ragged_arrow(sfb, type_id, children, name, meta, batches, model, usage)
      else
        sparse_arrow(sfb, type_id, children, name, field_meta, batches, model, usage)
      end
    end

    def ragged_arrow(sfb, type_id, children, name, meta, batches, model, usage)
      raise InvalidFieldError.new("the column is not a List", field: "embedding") unless type_id == TYPE_LIST && children.size == 1

      item = children[0]
      dtype = name && Dtype.check!(name, field: "densewire.dtype")
      case sfb.scalar(item, 2, "C", 0)
      when Arrow::TYPE_FIXED_SIZE_LIST
        d = sfb.scalar(sfb.table(item, 3), 0, "l<", 0)
        leaf = sfb.tables(item, 5).first or raise InvalidFieldError.new("list without an item field", field: "embedding")
        found = Arrow.item_dtype(sfb, sfb.scalar(leaf, 2, "C", 0), sfb.table(leaf, 3), dtype)
        dtype ||= found
        raise InvalidFieldError.new("item type does not hold #{dtype}", field: "embedding") unless found == dtype && dtype != "binary"
      when Arrow::TYPE_FIXED_SIZE_BINARY
        raise InvalidFieldError.new("FixedSizeBinary holds binary, not #{dtype}", field: "embedding") if dtype && dtype != "binary"

        dtype = "binary"
        width = sfb.scalar(sfb.table(item, 3), 0, "l<", 0)
        d = meta.key?("densewire.dimensions") ? Arrow.count(meta, "densewire.dimensions") : 8 * width
        raise InvalidFieldError.new("FixedSizeBinary(#{width}) cannot hold #{d} bits", field: "densewire.dimensions") unless Dtype.row_bytes("binary", d) == width
      else raise InvalidFieldError.new("the list items are not FixedSizeList or FixedSizeBinary", field: "embedding")
      end
      rb = Dtype.row_bytes(dtype, d)
      per_batch = []
      rows = batches.map do |fb, batch, payload, at|
        b = ArrowBatch.new(fb, batch, payload, at)
        offs, first, last = b.list
        per_batch << offs
        next b.values(rb, first, last) if dtype == "binary"

        fsl = b.node # the FixedSizeList: its validity, then its items
        b.buffer
        raise MalformedError.new("list offsets past the end of their values", offset: at) if last > fsl

        b.values(Dtype.item_bytes(dtype), first * d, last * d)
      end
      offsets = rebuild_offsets(per_batch)
      RaggedTensor.new(rows.join.b, dtype: dtype, d: d, offsets: offsets, model: model, usage: usage)
    end

    # The offsets of all batches, each batch's rebased list offsets appended after the last.
    def rebuild_offsets(per_batch)
      per_batch.each_with_object([0]) do |offs, all|
        base = all[-1]
        offs[1..].each { |o| all << base + o }
      end
    end

    def sparse_arrow(sfb, type_id, children, name, field_meta, batches, model, usage)
      ok = type_id == TYPE_STRUCT && children.size == 2 && children.map { |c| sfb.string(c, 0) } == %w[indices values] &&
           children.all? { |c| sfb.scalar(c, 2, "C", 0) == TYPE_LIST && sfb.tables(c, 5).size == 1 }
      raise InvalidFieldError.new("the column is not Struct<indices: List<UInt32>, values: List<T>>", field: "embedding") unless ok

      ileaf = sfb.tables(children[0], 5)[0]
      itype = sfb.table(ileaf, 3)
      unless sfb.scalar(ileaf, 2, "C", 0) == Arrow::TYPE_INT && sfb.scalar(itype, 0, "l<", 0) == 32 && sfb.scalar(itype, 1, "C", 0) != 1
        raise InvalidFieldError.new("the indices are not UInt32", field: "embedding")
      end
      dtype = sparse_dtype!(name || "float32", "densewire.dtype")
      vleaf = sfb.tables(children[1], 5)[0]
      found = Arrow.item_dtype(sfb, sfb.scalar(vleaf, 2, "C", 0), sfb.table(vleaf, 3), dtype)
      raise InvalidFieldError.new("the values do not hold #{dtype}", field: "embedding") unless found == dtype

      vs = field_meta["densewire.vocabulary_size"]
      v = vs.to_s.match?(/\A[1-9][0-9]*\z/) ? vs.to_i : nil
      vocabulary!(v, "densewire.vocabulary_size")
      size = Dtype.item_bytes(dtype)
      per_batch = []
      indices = []
      values = batches.map do |fb, batch, payload, at|
        b = ArrowBatch.new(fb, batch, payload, at)
        b.node
        b.buffer
        ioffs, ifirst, ilast = b.list
        ib = b.values(4, ifirst, ilast)
        voffs, vfirst, vlast = b.list
        raise ShapeMismatchError.new("a row's indices and values lists differ in length", field: "embedding") unless ioffs == voffs

        indices.concat(ib.unpack("V*"))
        per_batch << ioffs
        b.values(size, vfirst, vlast)
      end
      offsets = rebuild_offsets(per_batch)
      check_indices!(indices, offsets, v)
      SparseTensor.new(values.join.b, dtype: dtype, vocabulary: v, offsets: offsets, indices: indices, model: model, usage: usage)
    end
  end
end
