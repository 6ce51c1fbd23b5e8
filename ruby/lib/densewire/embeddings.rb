# frozen_string_literal: true

module Densewire
  # Token counts of an embeddings response.
  Usage = Struct.new(:prompt_tokens, :total_tokens, keyword_init: true) do
    # The largest count a decoder accepts (SPEC.md sections 6.2 and 8): 2^53 - 1, the largest integer
    # every language's JSON numbers hold exactly.
    MAX_COUNT = (2**53) - 1

    # A decoded usage map (JSON or MessagePack): nil when absent (nil); InvalidFieldError on "usage"
    # unless it is a map; a missing count is 0, a present one must be an Integer from 0 to MAX_COUNT
    # (InvalidFieldError on "usage.prompt_tokens" / "usage.total_tokens", a nil count included).
    def self.parse(value)
      return nil if value.nil?
      raise InvalidFieldError.new("must be a map of token counts, got #{value.inspect[0, 40]}", field: "usage") unless value.is_a?(Hash)

      counts = %w[prompt_tokens total_tokens].to_h do |key|
        v = value.fetch(key, 0)
        unless v.is_a?(Integer) && v >= 0 && v <= MAX_COUNT
          raise InvalidFieldError.new("must be an integer from 0 to 2^53-1, got #{v.inspect[0, 40]}", field: "usage.#{key}")
        end

        [key.to_sym, v]
      end
      new(**counts)
    end

    def to_h
      { "prompt_tokens" => prompt_tokens, "total_tokens" => total_tokens }
    end
  end

  # A decoded embeddings response (or tensor body): the Tensor and, where the format carried them,
  # the model id, the token usage and, for int8/uint8 rows a server quantized, the id of their
  # quantization ranges (nil otherwise; Densewire::Quantization turns the codes back into floats).
  class Embeddings
    attr_reader :tensor, :model, :usage, :quantization

    def initialize(tensor, model: nil, usage: nil, quantization: nil)
      @tensor = tensor
      @model = model
      @usage = usage
      @quantization = quantization
    end

    # The rows as Arrays of Ruby numbers (Tensor#rows).
    def to_a
      @tensor.rows
    end

    # Each row's little-endian bytes (Tensor#packed_rows).
    def packed_rows
      @tensor.packed_rows
    end

    def dtype
      @tensor.dtype
    end

    def shape
      @tensor.shape
    end

    def ==(other)
      other.is_a?(Embeddings) && other.tensor == @tensor && other.model == @model && other.usage == @usage &&
        other.quantization == @quantization
    end

    def inspect
      q = @quantization ? " quantization=#{@quantization}" : ""
      "#<Densewire::Embeddings #{@tensor.inspect} model=#{@model.inspect} usage=#{@usage&.to_h.inspect}#{q}>"
    end
  end
end
