// Package densewire moves embeddings and other dense numeric tensors between services in the
// formats of the densewire wire spec 1.4 (SPEC.md at the repository root): Base64, the
// OpenAI-compatible JSON envelope, raw bodies, MessagePack, Protobuf and Arrow, with the same bytes
// and the same errors as the Python, TypeScript, Java, Rust and Ruby libraries; and tables (section
// 15) in their seven formats.
//
// Import it as
//
//	import densewire "github.com/densewire/densewire/go"
//
// # Tensors
//
// A [Tensor] is an (N, D) row-major matrix of one [DType] (float32, float16, bfloat16, float64,
// int8, uint8, binary) whose Data holds the little-endian bytes. [NewTensor] checks a buffer
// against a shape; [FromFloat32], [FromFloat64] and [FromRows] build tensors converting as the
// spec's section 3 says ([Float16Bits], [BFloat16Bits], [Float64ToFloat32], [PackBinary]).
// [Tensor.Float32] widens any dtype but binary to a []float32 in one bulk pass; [ViewFloat32] and
// [Tensor.ViewFloat32] give the same without a copy when that is sound (little-endian host,
// 4-byte aligned data). [Meta] carries the model and token usage of an embeddings response;
// encoders given a nil *Meta write a bare tensor.
//
// # Codecs
//
// Each format has an encoder and a decoder; decoders never infer a shape from a byte length, and
// read in place where the format allows (the tensor then aliases the input):
//
//   - Base64: [EncodeBase64], [AppendBase64], [DecodeBase64] (strict, either byte order)
//   - JSON embeddings envelope: [EncodeJSON], [AppendJSON], [DecodeJSON]
//   - raw body: [SetRawHeaders] (the body is Tensor.Data), [DecodeRaw]
//   - MessagePack: [EncodeMsgpack], [AppendMsgpack], [DecodeMsgpack]
//   - Protobuf (proto/densewire/v1/tensor.proto): [EncodeProtobuf], [AppendProtobuf],
//     [DecodeProtobuf] (EmbeddingsResponse), [DecodeProtobufTensor] (Tensor); the generated
//     message types are in the subpackage densewirepb
//   - Arrow IPC stream: the subpackage arrowipc, which registers itself with [Encode] and
//     [Decode] (the format-generic entry points) when imported
//   - ragged tensors ([RaggedTensor]: n matrices over one buffer of rows and uint32 offsets) and
//     sparse tensors ([SparseTensor]: ascending uint32 indices and values per input) in every format
//     (SPEC.md section 20): [DecodeRaggedRaw], [DecodeRaggedJSON], [DecodeRaggedMsgpack],
//     [DecodeRaggedProtobuf], the Sparse ones, their encoders, and arrowipc.DecodeRagged /
//     DecodeSparse; [Client.EmbedTokens] asks POST /embed_all for per-token embeddings and
//     [Client.EmbedSparse] POST /embed_sparse for sparse (SPLADE) vectors
//   - KServe v2 (Open Inference Protocol) responses, JSON tensors and the binary tensor extension:
//     [DecodeKServe] into a [KServeResponse] whose outputs' tensors alias the body
//     ([KServeResponse.Embeddings], [KServeDType])
//
// # Tables
//
// A [Table] is n rows of typed [Column]s ([ColumnType]: bool, int32, int64, float32, float64,
// string, uuid, float32[d]), fixed-width values in Column.Data (little-endian, read through
// [Column.Int32], [Column.Float64], [Column.UUIDs], [Column.Vectors] and the other accessors) and
// strings in Column.Strings. Decoders: [DecodeTableProtobuf] (plain and byte-stream-split columns),
// [DecodeTableMsgpack], [DecodeTableJSON] (objects, typed by the Densewire-Columns header:
// [ParseColumnsHeader], [ParseTableHeaders]), [DecodeTableJSONRows], [DecodeTableJSONColumns],
// [DecodeTableCSV], arrowipc.DecodeTable, or [DecodeTable] and [DecodeTableResponse] by format;
// encoders [EncodeTable] and the per-format ones. [Client.GetTable], [Client.GetTables] and
// [Client.ListTables] call GET /v1/tables/{name} and GET /v1/tables with content negotiation,
// zstd/br/gzip decompression and ETag revalidation.
//
// # Quantized embeddings
//
// A server answers int8 and uint8 embeddings quantized with per-dimension ranges it publishes
// under a quantization id (SPEC.md section 17), which every decoder returns in
// [Meta].Quantization. [Dequantize] turns the codes back into float32 with the ranges, [Quantize]
// quantizes by the same rule (and [QuantizeValue], [DequantizeValue] one value),
// [QuantizationID] names a pair of ranges, [ParseQuantization] reads a published object
// ([Quantization]); [Client.Quantization] fetches one (GET /v1/quantization/{id}, cached by id),
// and [EmbeddingsRequest].Dequantize has [Client.Embed] answer float32 from int8 or uint8 codes.
// [OffsetBinary] reads packed bits as Cohere's "binary" type.
//
// # PostgreSQL binary COPY
//
// [EncodeCopy] writes the stream of COPY table (id, embedding) FROM STDIN (FORMAT BINARY) from a
// tensor, for a pgvector vector, halfvec, bit or sparsevec column ([CopyColumns], [PgType]) after
// an optional int8, int4, text or uuid id column ([CopyIDs]); [NewCopyReader] streams it a chunk of
// rows at a time as an io.Reader (pgx: conn.PgConn().CopyFrom(ctx, reader, [CopyFromSQL](table,
// cols))); [AppendCopyTuples] writes the tuples alone. [DecodeCopy] reads COPY ... TO STDOUT
// (FORMAT BINARY) back into one tensor and the ids (SPEC.md section 16).
//
// # HTTP
//
// [Client] calls POST /v1/embeddings on a densewire or OpenAI-compatible server: it splits the
// input into batches sent concurrently (bounded, cancelled together by the context), asks for the
// fastest body it can decode (raw, MessagePack, Protobuf, then JSON) and decodes whatever the
// server chose, retrying a 429, a 503 or a failed connection with backoff (see [RetryPolicy]). On
// the server side, [Negotiate] and [NegotiateRequest] pick a format from Accept
// (q-values, RFC 9110) or the format query parameter, [WriteTensor] and [TensorHandler] answer in
// it with Vary and, by Accept-Encoding, zstd, br or gzip compression, and [WriteError] writes the
// OpenAI error envelope. The package reads no request bodies: a [TensorHandler]'s Tensor function
// reads its own.
//
// # Errors
//
// Every failure is an [*Error] with a [Category] of the spec's section 11 (invalid_base64,
// length_mismatch, shape_mismatch, unknown_dtype, truncated, malformed, invalid_field,
// non_finite, and the HTTP ones), an Offset (characters of a Base64 string, bytes of a body; -1
// when none) and a Field (a JSON path such as data[3].embedding, a MessagePack/Protobuf field
// name or an HTTP header). Use errors.As to get at it, and errors.Is with a Category:
//
//	if errors.Is(err, densewire.Truncated) { ... }
//
// Errors answered by a server keep its status, code, param, offset and message.
package densewire
