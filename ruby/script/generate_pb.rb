# frozen_string_literal: true

# Regenerates lib/densewire/v1/tensor_pb.rb from proto/densewire/v1/tensor.proto:
#
#   apt-get install protobuf-compiler && ruby ruby/script/generate_pb.rb
#
# protoc writes the FileDescriptorSet; the file it makes is in the serialized-descriptor form that
# protoc 3.25+ emits for Ruby, which loads with google-protobuf 3.21 (Debian 12) up to 4.x.

require "tmpdir"

root = File.expand_path("../..", __dir__)
out = File.join(root, "ruby", "lib", "densewire", "v1", "tensor_pb.rb")
set = Dir.mktmpdir do |dir|
  path = File.join(dir, "tensor.desc")
  system("protoc", "-I", File.join(root, "proto"), "--descriptor_set_out=#{path}",
         File.join(root, "proto", "densewire", "v1", "tensor.proto"), exception: true)
  File.binread(path)
end
# FileDescriptorSet { repeated FileDescriptorProto file = 1; } holding exactly one file.
raise "unexpected descriptor set" unless set.getbyte(0) == 0x0a

len = 0
shift = 0
pos = 1
loop do
  byte = set.getbyte(pos)
  pos += 1
  len |= (byte & 0x7F) << shift
  shift += 7
  break if byte < 0x80
end
raise "descriptor set holds more than one file" unless pos + len == set.bytesize

plain = ->(b) { b >= 0x20 && b < 0x7F && !'"\\#'.include?(b.chr) }
literal = set.byteslice(pos, len).bytes.map { |b| plain.call(b) ? b.chr : format("\\x%02x", b) }.join
File.write(out, <<~RUBY)
  # frozen_string_literal: true

  # Generated from proto/densewire/v1/tensor.proto by ruby/script/generate_pb.rb (protoc's descriptor
  # in the serialized form protoc 3.25+ emits, so it loads with google-protobuf 3.21 to 4.x). DO NOT EDIT.

  require "google/protobuf"

  descriptor_data = "#{literal}".b

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
RUBY
puts "wrote #{out}"
