# frozen_string_literal: true

module Densewire
  # Token counts of an embeddings response.
  Usage = Struct.new(:prompt_tokens, :total_tokens, keyword_init: true) do
    def to_h
      { "prompt_tokens" => prompt_tokens, "total_tokens" => total_tokens }
    end
  end

  # A decoded embeddings response (or tensor body): the Tensor and, where the format carried them,
  # the model id and the token usage (nil otherwise).
  class Embeddings
    attr_reader :tensor, :model, :usage

    def initialize(tensor, model: nil, usage: nil)
      @tensor = tensor
      @model = model
      @usage = usage
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
      other.is_a?(Embeddings) && other.tensor == @tensor && other.model == @model && other.usage == @usage
    end

    def inspect
      "#<Densewire::Embeddings #{@tensor.inspect} model=#{@model.inspect} usage=#{@usage&.to_h.inspect}>"
    end
  end
end
