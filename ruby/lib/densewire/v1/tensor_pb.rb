# frozen_string_literal: true

# Generated from proto/densewire/v1/tensor.proto by ruby/script/generate_pb.rb (protoc's descriptor
# in the serialized form protoc 3.25+ emits, so it loads with google-protobuf 3.21 to 4.x). DO NOT EDIT.

require "google/protobuf"

descriptor_data = "\x0a\x19densewire/v1/tensor.proto\x12\x0cdensewire.v1\x22]\x0a\x06Tensor\x12)\x0a\x05dtype\x18\x01 \x01(\x0e2\x13.densewire.v1.DTypeR\x05dtype\x12\x14\x0a\x05shape\x18\x02 \x03(\x04R\x05shape\x12\x12\x0a\x04data\x18\x03 \x01(\x0cR\x04data\x22O\x0a\x05Usage\x12\x23\x0a\x0dprompt_tokens\x18\x01 \x01(\x04R\x0cpromptTokens\x12!\x0a\x0ctotal_tokens\x18\x02 \x01(\x04R\x0btotalTokens\x22\xaf\x01\x0a\x12EmbeddingsResponse\x12\x14\x0a\x05model\x18\x01 \x01(\x09R\x05model\x124\x0a\x0aembeddings\x18\x02 \x01(\x0b2\x14.densewire.v1.TensorR\x0aembeddings\x12)\x0a\x05usage\x18\x03 \x01(\x0b2\x13.densewire.v1.UsageR\x05usage\x12\x22\x0a\x0cquantization\x18\x04 \x01(\x09R\x0cquantization*\x9e\x01\x0a\x05DType\x12\x15\x0a\x11DTYPE_UNSPECIFIED\x10\x00\x12\x11\x0a\x0dDTYPE_FLOAT32\x10\x01\x12\x11\x0a\x0dDTYPE_FLOAT16\x10\x02\x12\x12\x0a\x0eDTYPE_BFLOAT16\x10\x03\x12\x11\x0a\x0dDTYPE_FLOAT64\x10\x04\x12\x0e\x0a\x0aDTYPE_INT8\x10\x05\x12\x0f\x0a\x0bDTYPE_UINT8\x10\x06\x12\x10\x0a\x0cDTYPE_BINARY\x10\x07BF\x0a\x13dev.densewire.protoP\x01Z-github.com/densewire/densewire/go/densewirepbb\x06proto3".b

pool = Google::Protobuf::DescriptorPool.generated_pool
pool.add_serialized_file(descriptor_data) unless pool.lookup("densewire.v1.Tensor")

module Densewire
  module V1
    Tensor = ::Google::Protobuf::DescriptorPool.generated_pool.lookup("densewire.v1.Tensor").msgclass
    Usage = ::Google::Protobuf::DescriptorPool.generated_pool.lookup("densewire.v1.Usage").msgclass
    EmbeddingsResponse = ::Google::Protobuf::DescriptorPool.generated_pool.lookup("densewire.v1.EmbeddingsResponse").msgclass
    DType = ::Google::Protobuf::DescriptorPool.generated_pool.lookup("densewire.v1.DType").enummodule
  end
end
