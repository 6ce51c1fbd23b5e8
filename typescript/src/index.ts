/**
 * densewire: embeddings, numeric tensors and tables on the wire at memory speed (wire spec 1.4).
 *
 * The one public surface of the package. Modules by format: base64, json, raw, msgpack, protobuf,
 * arrow (optional peer dependency apache-arrow), ragged and sparse tensors in each of them (ragged*.ts), kserve (KServe v2 binary-extension responses), quantization (int8/uint8 codes and their ranges),
 * and the embeddings client; tables (SPEC.md section
 * 15: src/tables/) with their decoders, encoders and client.
 */
export {
  type ByteOrder,
  type DType,
  type DTypeArrays,
  type Embeddings,
  type Tensor,
  type TensorData,
  type Usage,
  DTYPES,
  DTYPE_NAMES,
  LITTLE_ENDIAN_HOST,
  checkShape,
  isDType,
  itemCount,
  makeTensor,
  parseByteOrder,
  parseDType,
  row,
  rowBytes,
} from "./dtypes.js";
export {
  type ErrorCategory,
  type ErrorLocation,
  DensewireConnectionError,
  DensewireError,
  DensewireHTTPError,
  HTTP_STATUS,
  RateLimitError,
} from "./errors.js";
export { type RetryFailure, type RetryOptions, DEFAULT_RETRY, MAX_RETRY_AFTER_SECONDS, backoffMs, parseRetryAfter, retryPolicy, retryWait } from "./retry.js";
export {
  asFloat16Array,
  bfloat16ToFloat32,
  float16BitsToFloat32Bits,
  float16ToFloat32,
  float32BitsToBfloat16Bits,
  float32BitsToFloat16Bits,
  float32ToBfloat16,
  float32ToBinary,
  float32ToFloat16,
  float64ToBfloat16Bits,
  float64ToFloat16Bits,
  float64ToFloat32,
  float64ToFloat32Bits,
  fromFloat32,
  toFloat32,
  unpackBits,
} from "./convert.js";
export {
  type Base64Backend,
  type Base64DecodeOptions,
  availableBase64Backends,
  base64Backend,
  base64DecodedLength,
  base64ToBytes,
  bytesToBase64,
  decodeBase64,
  decodeBase64Into,
  encodeBase64,
  setBase64Backend,
} from "./base64.js";
export { type EncodingFormat, type JSONEncodeOptions, decodeJSON, encodeJSON } from "./json.js";
export { type HeadersInput, type RawMessage, decodeRaw, encodeRaw, getHeader } from "./raw.js";
export { decodeMsgpack, encodeMsgpack } from "./msgpack.js";
export { type ProtobufMessage, decodeProtobuf, encodeProtobuf } from "./protobuf.js";
export { decodeArrow, encodeArrow, setArrowImporter } from "./arrow.js";
export {
  type KindEncodeOptions,
  type RaggedTensor,
  type SparseDType,
  type SparseTensor,
  decodeRaggedRaw,
  decodeSparseRaw,
  encodeRaggedRaw,
  encodeSparseRaw,
  makeRagged,
  makeSparse,
  raggedMatrix,
  sparseVector,
} from "./ragged.js";
export { type KindJSONOptions, decodeRaggedJSON, decodeSparseJSON, encodeRaggedJSON, encodeSparseJSON } from "./ragged-json.js";
export { decodeRaggedMsgpack, decodeSparseMsgpack, encodeRaggedMsgpack, encodeSparseMsgpack } from "./ragged-msgpack.js";
export {
  type RaggedProtobufMessage,
  type SparseProtobufMessage,
  decodeRaggedProtobuf,
  decodeSparseProtobuf,
  encodeRaggedProtobuf,
  encodeSparseProtobuf,
} from "./ragged-protobuf.js";
export { decodeRaggedArrow, decodeSparseArrow, encodeRaggedArrow, encodeSparseArrow } from "./ragged-arrow.js";
export {
  type KServeDatatype,
  type KServeOutput,
  type KServeResponse,
  INFERENCE_HEADER_CONTENT_LENGTH,
  KSERVE_DATATYPES,
  decodeKServe,
  kserveEmbeddings,
  parseKServeDatatype,
} from "./kserve.js";
export {
  type Quantization,
  type QuantizationCalibration,
  type QuantizationRanges,
  type QuantizedDType,
  QUANTIZATION_METHOD,
  cohereBinary,
  dequantize,
  fromCohereBinary,
  parseQuantization,
  quantizationId,
  quantize,
} from "./quantization.js";
export {
  type ClientOptions,
  type EmbedManyOptions,
  type EmbedOptions,
  type SparseOptions,
  type Format,
  DEFAULT_FORMATS,
  DensewireClient,
  MEDIA_TYPES,
  acceptHeader,
  concatRows,
  decodeResponse,
  decodeSparseResponse,
  decodeTokensResponse,
  formatOfContentType,
} from "./client.js";
export {
  type ColumnArrays,
  type ColumnSpec,
  type ColumnType,
  type ScalarColumnType,
  type Table,
  type TableColumn,
  type TableDecodeOptions,
  type TableFormat,
  type VectorColumnType,
  TABLE_FORMATS,
  TABLE_MEDIA_TYPES,
  byteStreamSplit,
  byteStreamUnsplit,
  columnsHeader,
  encodeColumnName,
  isColumnType,
  makeTable,
  parseColumnType,
  parseColumnsHeader,
  parseUuid,
  tableColumn,
  tableFormatOfContentType,
  tableHeaders,
  typeWidth,
  uuidToString,
  vectorDimensions,
} from "./tables/model.js";
export {
  decodeTableJSON,
  decodeTableJSONColumns,
  decodeTableJSONRows,
  encodeTableJSON,
  encodeTableJSONColumns,
  encodeTableJSONRows,
} from "./tables/json.js";
export { decodeTableCSV, encodeTableCSV } from "./tables/csv.js";
export { decodeTableMsgpack, encodeTableMsgpack } from "./tables/msgpack.js";
export { type TableProtobufOptions, decodeTableProtobuf, encodeTableProtobuf } from "./tables/protobuf.js";
export { decodeTableArrow, encodeTableArrow } from "./tables/arrow.js";
export { decodeTable, decodeTableSync, encodeTable, encodeTableSync } from "./tables/index.js";
export {
  type GetTableOptions,
  type TableInfo,
  type TableResult,
  type TablesClientOptions,
  DEFAULT_TABLE_FORMATS,
  TablesClient,
  tableAcceptHeader,
} from "./tables/client.js";
/**
 * The generated Protobuf schemas (protoc-gen-es) of tensor.proto and table.proto, for use with
 * @bufbuild/protobuf's create/toBinary/fromBinary (`pb.TensorSchema`, `pb.TableSchema`, ...).
 */
export * as pb from "./tables/pb.js";

/** The wire spec version this package implements. */
export const SPEC_VERSION = "1.4";
