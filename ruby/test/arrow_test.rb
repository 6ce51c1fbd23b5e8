# frozen_string_literal: true

require_relative "test_helper"
require "tmpdir"

class ArrowTest < Minitest::Test
  A = Densewire::Arrow

  # [continuation + length + metadata + body] messages of a stream, the end marker dropped.
  def messages(stream)
    out = []
    pos = 0
    loop do
      len = stream.byteslice(pos + 4, 4).unpack1("l<")
      break if len.zero?

      meta = stream.byteslice(pos + 8, len)
      body_len = A::FlatBuffer.new(stream, pos + 8, len).then { |fb| fb.scalar(fb.root, 3, "q<", 0) }
      out << stream.byteslice(pos, 8 + len + body_len)
      pos += 8 + meta.bytesize + body_len
    end
    out
  end

  def test_every_dtype_round_trips
    [["float32", [[1.0, -2.5, 0.1]]], ["float16", [[1.0, -2.5]]], ["bfloat16", [[1.0, -2.5]]], ["float64", [[0.1, 2.0]]],
     ["int8", [[-1, 2]]], ["uint8", [[0, 255]]], ["binary", [[1, 0, 1, 1, 0, 0, 1, 1, 1]]]].each do |dtype, rows|
      t = Densewire::Tensor.from_values(rows, dtype: dtype)
      assert_equal t, A.decode(A.encode(t)).tensor, dtype
    end
  end

  def test_several_batches_are_concatenated_and_the_end_marker_is_optional
    a = Densewire::Tensor.from_values([[1.0, 2.0]])
    b = Densewire::Tensor.from_values([[3.0, 4.0], [5.0, 6.0]])
    schema, batch_a = messages(A.encode(a))
    _, batch_b = messages(A.encode(b))
    stream = schema + batch_a + batch_b
    assert_equal [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], A.decode(stream).to_a
    assert_equal [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], A.decode(stream + [A::CONTINUATION, 0].pack("L<l<")).to_a
    assert_equal [0, 2], A.decode(schema).shape
  end

  def test_errors
    stream = A.encode(Densewire::Tensor.from_values([[1.0, 2.0]]), model: "m")
    schema, batch = messages(stream)
    [
      [stream.byteslice(0, 30), Densewire::TruncatedError, 30],
      [stream.byteslice(0, stream.bytesize - 12), Densewire::TruncatedError, stream.bytesize - 12],
      ["".b, Densewire::TruncatedError, 0],
      [batch + schema, Densewire::MalformedError, nil],
      [schema + schema, Densewire::MalformedError, nil],
    ].each do |body, klass, offset|
      error = assert_raises(klass) { A.decode(body) }
      assert_equal offset, error.offset if offset
    end
  end

  def test_schema_errors
    other = A.encode(Densewire::Tensor.from_values([[1.0]])).sub("embedding".b, "embeddinx".b)
    assert_equal "embedding", assert_raises(Densewire::InvalidFieldError) { A.decode(other) }.field
    unknown = A.encode(Densewire::Tensor.from_values([[1.0]])).gsub("float32".b, "float31".b)
    assert_raises(Densewire::UnknownDtypeError) { A.decode(unknown) }
  end

  def test_media_type_dispatch
    t = Densewire::Tensor.from_values([[1.0, 2.0]])
    type, _, body = Densewire::Media.encode_response(Densewire::Embeddings.new(t, model: "m"), :arrow)
    assert_equal "application/vnd.apache.arrow.stream", type
    result = Densewire::Media.decode_response(body, content_type: type)
    assert_equal [t, "m"], [result.tensor, result.model]
  end
end

# Our streams as pyarrow reads them (SPEC.md section 10: an implementation's own Arrow encoding must
# decode by pyarrow too). Uses the project's Python environment (.venv, made by the project's test
# command) or DENSEWIRE_PYTHON; without a Python that has pyarrow the test says so as a skip.
class ArrowPyarrowTest < Minitest::Test
  SCRIPT = <<~PY
    import json, sys, pyarrow as pa
    out = {}
    for path in sys.argv[1:]:
        table = pa.ipc.open_stream(open(path, "rb").read()).read_all()
        table.validate(full=True)
        field = table.schema.field("embedding")
        col = table.column("embedding").combine_chunks()
        if pa.types.is_fixed_size_binary(col.type):
            data = b"".join(col.to_pylist())
        else:
            width = col.type.value_type.bit_width // 8
            data = col.values.buffers()[1].to_pybytes()[: len(col) * col.type.list_size * width] if len(col) else b""
        meta = {k.decode(): v.decode() for k, v in table.schema.metadata.items()}
        out[path] = {"rows": table.num_rows, "nullable": field.nullable, "meta": meta,
                     "field_dtype": field.metadata[b"densewire.dtype"].decode(), "hex": data.hex()}
    print(json.dumps(out))
  PY

  def python
    candidates = [ENV["DENSEWIRE_PYTHON"], File.join(GoldenFiles.root, ".venv", "bin", "python")].compact
    candidates.find { |py| File.executable?(py) && system(py, "-c", "import pyarrow", out: File::NULL, err: File::NULL) }
  end

  def test_pyarrow_reads_every_stream_we_write
    py = python
    skip "no Python with pyarrow (make setup, or DENSEWIRE_PYTHON=...)" unless py
    cases = GoldenFiles.cases("tensors").select { |c| c["format"] == "arrow" }
    Dir.mktmpdir do |dir|
      paths = cases.map do |c|
        path = File.join(dir, "#{c["id"]}.arrows")
        meta = c["model"] ? { model: c["model"], usage: c["usage"] } : {}
        File.binwrite(path, Densewire::Arrow.encode(GoldenFiles.tensor(c), **meta))
        path
      end
      out = IO.popen([py, "-c", SCRIPT, *paths], &:read)
      assert $?.success?, "pyarrow failed to read our streams"
      read = JSON.parse(out)
      cases.zip(paths).each do |c, path|
        r = read.fetch(path)
        assert_equal [c["shape"][0], false, c["dtype"], c["dtype"], c["shape"][1].to_s],
                     [r["rows"], r["nullable"], r["field_dtype"], r["meta"]["densewire.dtype"], r["meta"]["densewire.dimensions"]], c["id"]
        assert_equal GoldenFiles.hex(GoldenFiles.le_bytes(c["items"])), r["hex"], c["id"]
        assert_equal c["model"], r["meta"]["densewire.model"], c["id"] if c["model"]
      end
    end
  end
end
