/**
 * The generated Protobuf schemas (protoc-gen-es, src/gen/, `npm run generate`) of both proto files,
 * exported together as the package's `pb` namespace: tensors (`TensorSchema`, `EmbeddingsResponseSchema`,
 * `DType`, ...) and tables (`TableSchema`, `ColumnSchema`, `ColumnType`, `ColumnEncoding`), for use with
 * @bufbuild/protobuf's `create`, `toBinary` and `fromBinary`.
 */
export * from "../gen/densewire/v1/tensor_pb.js";
export * from "../gen/densewire/v1/table_pb.js";
