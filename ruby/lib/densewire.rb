# frozen_string_literal: true

# densewire: embeddings and numeric tensors over the wire at memory speed (SPEC.md 1.4).
#
#   require "densewire"
#   t = Densewire::Tensor.from_values([[1.0, -2.5, 0.1]])
#   text = Densewire::Base64.encode(t)                     # => "AACAPwAAIMDNzMw9"
#   Densewire::Base64.decode(text, dtype: "float32", shape: [1, 3]).rows
#
# Formats: Densewire::Base64, Densewire::JSONEnvelope, Densewire::Raw, Densewire::Msgpack (needs the
# msgpack gem), Densewire::Protobuf, Densewire::Arrow; KServe v2 responses: Densewire::KServe;
# ragged and sparse tensors: Densewire::RaggedTensor, Densewire::SparseTensor, Densewire::Kinds; negotiation and dispatch by media type:
# Densewire::Media; quantized int8/uint8 rows: Densewire::Quantization (dequantize, quantize, the
# ranges' id); tables (SPEC.md section 15): Densewire::Table and its decoders
# (TableProtobuf, TableMsgpack, TableJSON, TableCSV, TableArrow); HTTP: Densewire::Client (retries: Densewire::Retry). Errors: Densewire::Error and one
# subclass per category of SPEC.md section 11.
module Densewire
end

require_relative "densewire/version"
require_relative "densewire/errors"
require_relative "densewire/dtype"
require_relative "densewire/convert"
require_relative "densewire/tensor"
require_relative "densewire/embeddings"
require_relative "densewire/base64"
require_relative "densewire/json_envelope"
require_relative "densewire/raw"
require_relative "densewire/msgpack"
require_relative "densewire/protobuf"
require_relative "densewire/arrow"
require_relative "densewire/kserve"
require_relative "densewire/ragged"
require_relative "densewire/ragged_formats"
require_relative "densewire/ragged_arrow"
require_relative "densewire/quantization"
require_relative "densewire/media"
require_relative "densewire/table"
require_relative "densewire/table_protobuf"
require_relative "densewire/table_msgpack"
require_relative "densewire/table_json"
require_relative "densewire/table_csv"
require_relative "densewire/table_arrow"
require_relative "densewire/retry"
require_relative "densewire/client"
