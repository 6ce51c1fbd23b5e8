# frozen_string_literal: true

require_relative "test_helper"

# Densewire::KServe: the golden cases of kserve.json Ruby claims (the response reader; the
# kserve_request cases are a server's), then what they do not show.
class KServeTest < Minitest::Test
  K = Densewire::KServe
  CLAIMED = GoldenCapabilities.claimed(%w[kserve])

  GoldenFiles.cases("kserve").each do |c|
    next unless CLAIMED.include?(c["id"])

    define_method("test_#{c["id"]}") do
      if c.key?("error")
        error = assert_raises(Densewire::Error) { K.decode([c["input_hex"]].pack("H*"), c["headers"]) }
        assert_golden_error(c, error)
        next
      end
      r = K.decode([c["encoded_hex"]].pack("H*"), c["headers"])
      assert_equal [c["model_name"], c["model_version"], c["response_id"]], [r.model_name, r.model_version, r.id]
      assert_equal(c["outputs"].map { |o| o["name"] }, r.outputs.keys)
      c["outputs"].each do |o|
        out = r.outputs[o["name"]]
        assert_equal [o["datatype"], o["shape"], o["binary"]], [out.datatype, out.shape, out.binary]
        assert_equal o["parameters"], out.parameters.except("binary_data_size")
        if o["datatype"] == "BYTES"
          assert_equal o["elements_hex"], out.elements.map { |e| GoldenFiles.hex(e) }
        else
          shape = o["shape"].size == 1 ? [1, o["shape"][0]] : o["shape"]
          assert_equal [o["dtype"], shape], [out.tensor.dtype, out.tensor.shape]
          assert_equal GoldenFiles.hex(GoldenFiles.le_bytes(o["items"])), GoldenFiles.hex(out.tensor.data)
        end
      end
    end
  end

  def body(header, blob)
    [header.b + blob.b, { "inference-header-content-length" => header.bytesize.to_s }]
  end

  def test_embeddings_with_model_and_quantization_id
    header = '{"model_name":"m","outputs":[{"name":"embedding","datatype":"INT8","shape":[1,3],' \
             '"parameters":{"quantization":"455fc59476466b04","binary_data_size":3}}]}'
    e = K.decode(*body(header, [-128, 0, 127].pack("c*"))).embeddings
    assert_equal [[[-128, 0, 127]], "m", "455fc59476466b04"], [e.tensor.rows, e.model, e.quantization]
    error = assert_raises(Densewire::InvalidFieldError) { K.decode(*body(header, "\0\0\0")).embeddings("pooled") }
    assert_equal "outputs", error.field
  end

  def test_json_data_nested_and_integral_floats_as_int8
    doc = ->(data) { %({"outputs":[{"name":"e","datatype":"INT8","shape":[2,2],"data":#{data}}]}) }
    assert_equal [[1, -2], [3, -128]], K.decode(doc.call("[[1,-2],[3,-128]]")).outputs["e"].tensor.rows
    assert_equal [[1, 2], [-3, 4]], K.decode(doc.call("[1,2.0,-3e0,4]")).outputs["e"].tensor.rows # SPEC.md 3.5
    error = assert_raises(Densewire::InvalidFieldError) { K.decode(doc.call("[1,2.5,3,4]")) }
    assert_equal "outputs[0].data[1]", error.field
    f16 = K.decode('{"outputs":[{"name":"e","datatype":"FP16","shape":[3],"data":[1,65520,0.1]}]}').outputs["e"].tensor
    assert_equal %w[3c00 7c00 2e66], f16.bits.map { |b| b.to_s(16).rjust(4, "0") } # 65520 rounds to +Inf, ties to even
  end

  def test_datatypes_without_a_dtype
    assert_equal "bfloat16", K.dtype_of("BF16")
    %w[INT64 BYTES fp32].each do |name|
      error = assert_raises(Densewire::UnknownDtypeError) { K.dtype_of(name, "outputs[0].datatype") }
      assert_equal "outputs[0].datatype", error.field
    end
  end
end
