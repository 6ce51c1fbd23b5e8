# frozen_string_literal: true

require_relative "lib/densewire/version"

Gem::Specification.new do |spec|
  spec.name = "densewire"
  spec.version = Densewire::VERSION
  spec.summary = "Embeddings and numeric tensors over the wire at memory speed (densewire wire spec 1.4)"
  spec.description = "Base64, JSON envelope, raw, MessagePack, Protobuf and Arrow IPC codecs for embeddings with exact " \
                     "float16/bfloat16 conversions and typed errors, and a keep-alive HTTP client for " \
                     "/v1/embeddings that negotiates binary bodies. Standard library only; msgpack optional."
  spec.authors = ["densewire"]
  spec.license = "Apache-2.0"
  spec.required_ruby_version = ">= 2.7"
  spec.files = Dir["lib/**/*.rb", "README.md"]
  spec.require_paths = ["lib"]
  spec.metadata = { "rubygems_mfa_required" => "true" }
  # Optional, loaded only when used: msgpack (the MessagePack format), google-protobuf (generated
  # message classes, Densewire::Protobuf.messages). Neither is a hard dependency.
end
