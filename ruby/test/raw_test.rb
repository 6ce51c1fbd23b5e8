# frozen_string_literal: true

require_relative "test_helper"

class RawTest < Minitest::Test
  def test_round_trip_with_model_and_usage
    t = Densewire::Tensor.from_values([[1.0, 2.0]])
    headers, body = Densewire::Raw.encode(t, model: "m", usage: { prompt_tokens: 2, total_tokens: 2 })
    assert_equal({ "Densewire-Version" => "1", "Densewire-Dtype" => "float32", "Densewire-Shape" => "1,2",
                   "Densewire-Byteorder" => "little", "Densewire-Model" => "m", "Densewire-Prompt-Tokens" => "2",
                   "Densewire-Total-Tokens" => "2" }, headers)
    result = Densewire::Raw.decode(body, headers)
    assert_equal [t, "m", 2], [result.tensor, result.model, result.usage.total_tokens]
  end

  def test_header_names_are_case_insensitive
    result = Densewire::Raw.decode("\x00\x3c".b, { "densewire-dtype" => "float16", "DENSEWIRE-SHAPE" => "1,1" })
    assert_equal [1.0], result.tensor.to_a
    assert_nil result.model
  end

  def test_header_errors
    [
      [{ "Densewire-Dtype" => "float32" }, "Densewire-Shape"],
      [{ "Densewire-Dtype" => "float32", "Densewire-Shape" => "1, 1" }, "Densewire-Shape"],
      [{ "Densewire-Dtype" => "float32", "Densewire-Shape" => "1,1", "Densewire-Total-Tokens" => "x" }, "Densewire-Total-Tokens"],
    ].each do |headers, field|
      error = assert_raises(Densewire::InvalidFieldError) { Densewire::Raw.decode("\0" * 4, headers) }
      assert_equal field, error.field
    end
  end
end
