package densewire_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	densewire "github.com/densewire/densewire/go"
	_ "github.com/densewire/densewire/go/arrowipc" // registers the Arrow codec
)

// The README's code blocks are these examples' bodies (TestReadmeExamples checks it).

func ExampleClient_Embed() {
	// A densewire (or any OpenAI-compatible) embeddings server; here an in-process one.
	server := httptest.NewServer(&densewire.TensorHandler{Tensor: func(r *http.Request) (*densewire.Tensor, *densewire.Meta, error) {
		t, err := densewire.FromRows([][]float32{{1, -2.5, 0.1}, {3, 0.5, -1}}, densewire.Float32)
		return t, &densewire.Meta{Model: "m", PromptTokens: 6, TotalTokens: 6}, err
	}})
	defer server.Close()

	client := &densewire.Client{BaseURL: server.URL, APIKey: "sk-...", BatchSize: 256, Concurrency: 4}
	t, meta, err := client.Embed(context.Background(), &densewire.EmbeddingsRequest{
		Input: []string{"first text", "second text"},
		Model: "m",
	})
	if err != nil {
		log.Fatal(err)
	}
	vectors, _ := t.Float32() // row-major, t.N rows of t.D values
	fmt.Println(t.N, t.D, t.DType, meta.Model, meta.TotalTokens)
	fmt.Println(vectors[:3])
	// Output:
	// 2 3 float32 m 6
	// [1 -2.5 0.1]
}

func ExampleRetryPolicy() {
	// A server whose admission stays full: every request is answered 429.
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "0")
		densewire.WriteError(w, &densewire.Error{Category: densewire.RateLimited, Offset: -1, Message: "busy"})
	}))
	defer server.Close()

	client := &densewire.Client{
		BaseURL: server.URL,
		Retry:   &densewire.RetryPolicy{MaxRetries: 3, BaseDelay: 10 * time.Millisecond, MaxDelay: time.Second},
	}
	_, _, err := client.Embed(context.Background(), &densewire.EmbeddingsRequest{Input: []string{"a text"}})
	var e *densewire.Error
	if errors.As(err, &e) && errors.Is(err, densewire.RateLimited) {
		fmt.Println("still rate limited after", e.Attempts, "attempts")
	}
	fmt.Println(err)
	// Output:
	// still rate limited after 4 attempts
	// densewire: server answered 429 rate_limited: busy (4 attempts)
}

func ExampleTensorHandler() {
	handler := &densewire.TensorHandler{Tensor: func(r *http.Request) (*densewire.Tensor, *densewire.Meta, error) {
		t, err := densewire.FromFloat32([]float32{0.25, -1, 0.5, 2}, 2, 2, densewire.Float16)
		return t, &densewire.Meta{Model: "m"}, err
	}}
	// http.Handle("/v1/vectors", handler)

	req := httptest.NewRequest("GET", "/v1/vectors", nil)
	req.Header.Set("Accept", "application/json;q=0.5, application/vnd.msgpack")
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, req)
	fmt.Println(rec.Code, rec.Header().Get("Content-Type"), rec.Header().Get("Vary"))

	t, _, err := densewire.DecodeMsgpack(rec.Body.Bytes())
	if err != nil {
		log.Fatal(err)
	}
	values, _ := t.Float32()
	fmt.Println(t.DType, t.N, t.D, values)
	// Output:
	// 200 application/vnd.msgpack Accept, Accept-Encoding
	// float16 2 2 [0.25 -1 0.5 2]
}

func ExampleDecodeBase64() {
	// Elasticsearch's pack_dense_vector and Jackson's @JsonFormat(shape = BINARY) write big-endian
	// float32; OpenAI's encoding_format=base64 writes little-endian.
	t, err := densewire.DecodeBase64("P4AAAMAgAAA9zMzN", densewire.Float32, 1, 3, densewire.BigEndian)
	if err != nil {
		log.Fatal(err)
	}
	v, _ := t.Float32()
	fmt.Println(v)
	fmt.Println(densewire.EncodeBase64(t, densewire.LittleEndian))
	// Output:
	// [1 -2.5 0.1]
	// AACAPwAAIMDNzMw9
}

func ExampleDecodeJSON() {
	body := []byte(`{"object":"list","data":[
		{"object":"embedding","index":1,"embedding":"AABAQAAAAD8AAIC/"},
		{"object":"embedding","index":0,"embedding":"AACAPwAAIMDNzMw9"}],
		"model":"text-embedding-3-small","usage":{"prompt_tokens":6,"total_tokens":6}}`)
	t, meta, err := densewire.DecodeJSON(body) // rows are placed by index
	if err != nil {
		log.Fatal(err)
	}
	v, _ := t.Float32()
	fmt.Println(t.N, t.D, meta.Model, v)
	// Output:
	// 2 3 text-embedding-3-small [1 -2.5 0.1 3 0.5 -1]
}

func ExampleViewFloat32() {
	t, _ := densewire.DecodeBase64("AACAPwAAIMDNzMw9", densewire.Float32, 1, 3, densewire.LittleEndian)
	if v, ok := t.ViewFloat32(); ok { // no copy: little-endian host, aligned buffer
		fmt.Println(v)
	}
	// Output:
	// [1 -2.5 0.1]
}

func ExampleFromFloat32() {
	v := []float32{1, -2.5, 65520, 0x1p-25}
	half, _ := densewire.FromFloat32(v, 1, 4, densewire.Float16)
	fmt.Printf("% x\n", half.Data) // little-endian float16: 1, -2.5, +Inf (overflow), 0 (tie to even)
	bits, _ := densewire.FromFloat32([]float32{0.3, -0.1, 0, 2}, 1, 4, densewire.Binary)
	fmt.Printf("%08b\n", bits.Data[0]) // 1 where the value is > 0, most significant bit first
	// Output:
	// 00 3c 00 c1 00 7c 00 00
	// 10010000
}

func ExampleEncodeMsgpack() {
	t, _ := densewire.NewTensor(densewire.Uint8, 1, 3, []byte{1, 2, 3})
	fmt.Printf("%x\n", densewire.EncodeMsgpack(t, nil))
	fmt.Printf("%x\n", densewire.EncodeProtobuf(t, nil))
	// Output:
	// 83a56474797065a575696e7438a57368617065920103a464617461c403010203
	// 0806120201031a03010203
}

func ExampleError() {
	_, _, err := densewire.DecodeMsgpack([]byte{0x83, 0xa5, 'd', 't'})
	var e *densewire.Error
	if errors.As(err, &e) {
		fmt.Println(e.Category, e.Offset, e.Category.HTTPStatus())
	}
	fmt.Println(errors.Is(err, densewire.Truncated))
	fmt.Println(err)
	// Output:
	// truncated 4 400
	// true
	// densewire: MessagePack body ends early at offset 4
}

func ExampleNegotiate() {
	offered := []densewire.Format{densewire.FormatJSON, densewire.FormatRaw, densewire.FormatMsgpack}
	f, mediaType, ok := densewire.Negotiate("application/x-msgpack, application/json;q=0.5", offered)
	fmt.Println(f, mediaType, ok)
	// Output:
	// msgpack application/x-msgpack true
}

func ExampleClient_GetTable() {
	// A tables server (GET /v1/tables/{name}); here an in-process one serving a two-row table.
	table := &densewire.Table{Name: "points", Rows: 2, Columns: []densewire.Column{
		{ColumnSpec: densewire.ColumnSpec{Name: "status", Type: densewire.ColumnInt32}, Data: []byte{1, 0, 0, 0, 0, 0, 0, 0}},
		{ColumnSpec: densewire.ColumnSpec{Name: "longitude", Type: densewire.ColumnFloat64},
			Data: binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, math.Float64bits(-73.98)), math.Float64bits(139.73))},
	}}
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := densewire.EncodeTable(densewire.TableProtobuf, table)
		densewire.SetTableHeaders(w.Header(), table)
		w.Header().Set("Content-Type", "application/protobuf")
		w.Header().Set("ETag", `"v1"`)
		w.Write(body)
	}))
	defer server.Close()

	client := &densewire.Client{BaseURL: server.URL}
	res, err := client.GetTable(context.Background(), "points", nil) // Protobuf first, then MessagePack, ...
	if err != nil {
		log.Fatal(err)
	}
	tbl := res.Table
	status, _ := tbl.Column("status").Int32()
	lon, err := tbl.Column("longitude").Float64()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(tbl.Name, tbl.Rows, res.Format, res.ETag)
	fmt.Println(densewire.FormatColumnsHeader(tbl.Schema()))
	fmt.Println(status, lon)
	// Output:
	// points 2 protobuf "v1"
	// status=int32,longitude=float64
	// [1 0] [-73.98 139.73]
}

func ExampleDecodeTableCSV() {
	// CSV and JSON objects carry no types: they come from the Densewire-Columns header.
	columns, err := densewire.ParseColumnsHeader("id=uuid,label=string,v=float32[2]")
	if err != nil {
		log.Fatal(err)
	}
	body := []byte("id,label,v\r\n7c9e6679-7425-40de-944b-e07fc1f90ae7,\"a, b\",\"[0.5,-1.0]\"\r\n")
	tbl, err := densewire.DecodeTableCSV(body, "t", columns)
	if err != nil {
		log.Fatal(err)
	}
	ids, _ := tbl.Column("id").UUIDs()
	labels, _ := tbl.Column("label").StringValues()
	v, d, _ := tbl.Column("v").Vectors()
	fmt.Println(densewire.FormatUUID(ids[0]), labels[0], d, v)

	_, err = densewire.DecodeTableCSV([]byte("id,label,v\r\nnot-a-uuid,x,\"[1,2]\"\r\n"), "t", columns)
	fmt.Println(err)
	// Output:
	// 7c9e6679-7425-40de-944b-e07fc1f90ae7 a, b 2 [0.5 -1]
	// densewire: line 2, id: "not-a-uuid" is not a uuid
}

func ExampleEncodeCopy() {
	vectors, _ := densewire.FromRows([][]float32{{1, -2.5}, {0.5, 3}}, densewire.Float32)
	cols := densewire.CopyColumns{Type: densewire.PgHalfvec, IDType: densewire.PgInt8} // id int8, embedding halfvec(2)
	stream, err := densewire.EncodeCopy(vectors, cols, &densewire.CopyIDs{Ints: []int64{7, 8}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(stream), densewire.CopyFromSQL("items", cols))

	data, err := densewire.DecodeCopy(stream, cols) // what COPY ... TO STDOUT (FORMAT BINARY) sends
	if err != nil {
		log.Fatal(err)
	}
	v, _ := data.Tensor.Float32()
	fmt.Println(data.Tensor.DType, data.IDs.Ints, v)

	bad, _ := densewire.FromRows([][]float32{{1, 2}, {3, 70000}}, densewire.Float32)
	_, err = densewire.EncodeCopy(bad, cols, &densewire.CopyIDs{Ints: []int64{7, 8}})
	fmt.Println(err)
	// Output:
	// 73 COPY "items" ("id", "embedding") FROM STDIN (FORMAT BINARY)
	// float16 [7 8] [1 -2.5 0.5 3]
	// densewire: embedding[1][1]: +Inf cannot be stored in a halfvec (pgvector refuses NaN and infinity)
}

// copyVectorsWithPgx is the README's pgx example; TestPgxReadmeExample runs it against a real
// PostgreSQL with pgvector.
func copyVectorsWithPgx(ctx context.Context, conn *pgx.Conn, vectors *densewire.Tensor, ids []int64) (*densewire.CopyData, error) {
	cols := densewire.CopyColumns{Type: densewire.PgVector, IDType: densewire.PgInt8}
	// COPY "items" ("id", "embedding") FROM STDIN (FORMAT BINARY), 4096 rows at a time, each
	// chunk checked before it is sent: a NaN aborts the COPY and PostgreSQL keeps no row.
	reader := densewire.NewCopyReader(vectors, cols, &densewire.CopyIDs{Ints: ids}, 4096)
	if _, err := conn.PgConn().CopyFrom(ctx, reader, densewire.CopyFromSQL("items", cols)); err != nil {
		return nil, err
	}

	var buf bytes.Buffer
	sql := "COPY (SELECT id, embedding FROM items ORDER BY id) TO STDOUT (FORMAT BINARY)"
	if _, err := conn.PgConn().CopyTo(ctx, &buf, sql); err != nil {
		return nil, err
	}
	return densewire.DecodeCopy(buf.Bytes(), cols) // data.Tensor: (n, 384) float32, data.IDs.Ints
}

func ExampleEmbeddingsRequest_dequantize() {
	// A server that answers int8 codes with the quantization id of its ranges, and publishes the
	// ranges at GET /v1/quantization/{id}; here an in-process one.
	lower, upper := []float32{-1, -0.5, 0, -0.25}, []float32{1, 0.5, 1, 0.75}
	q := &densewire.Quantization{ID: densewire.QuantizationID(lower, upper), Method: densewire.QuantizationMethod,
		Dimensions: 4, Lower: lower, Upper: upper}
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/quantization/"+q.ID {
			json.NewEncoder(w).Encode(q)
			return
		}
		x, _ := densewire.FromRows([][]float32{{0, 0.1, 0.5, -0.1}}, densewire.Float32)
		codes, _ := densewire.Quantize(x, lower, upper, densewire.Int8)
		densewire.WriteTensor(w, r, codes, &densewire.Meta{Model: "m", Quantization: q.ID}, nil)
	}))
	defer server.Close()

	ctx := context.Background()
	client := &densewire.Client{BaseURL: server.URL}
	codes, meta, err := client.Embed(ctx, &densewire.EmbeddingsRequest{Input: []string{"a text"}, DType: densewire.Int8})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(codes.DType, len(codes.Data), "bytes,", meta.Quantization) // 1 byte per dimension on the wire

	// the same codes dequantized with the ranges the id names (fetched once per id, then cached)
	vectors, _, err := client.Embed(ctx, &densewire.EmbeddingsRequest{Input: []string{"a text"}, DType: densewire.Int8, Dequantize: true})
	if err != nil {
		log.Fatal(err)
	}
	v, _ := vectors.Float32()
	fmt.Println(vectors.DType, v)
	// Output:
	// int8 4 bytes, 455fc59476466b04
	// float32 [0 0.101960786 0.5 -0.09901961]
}

func ExampleDequantize() {
	lower, upper := []float32{-1, -0.5, 0, -0.25}, []float32{1, 0.5, 1, 0.75} // a server's published ranges
	codes, _ := densewire.NewTensor(densewire.Uint8, 1, 4, []byte{0, 128, 255, 64})
	x, err := densewire.Dequantize(codes, lower, upper) // float32(lower + (u + 0.5) * step), step = (upper - lower) / 255
	if err != nil {
		log.Fatal(err)
	}
	v, _ := x.Float32()
	fmt.Println(v, densewire.QuantizationID(lower, upper))
	back, _ := densewire.Quantize(x, lower, upper, densewire.Uint8) // floor((x - lower) / step), clamped to 0..255
	fmt.Println(back.Data)
	// Output:
	// [-0.99607843 0.003921569 1.0019608 0.0029411765] 455fc59476466b04
	// [0 128 255 64]
}

func ExampleDecodeKServe() {
	// a KServe v2 / Triton response with the binary tensor extension: JSON header, then the blob
	header := `{"model_name":"m","outputs":[{"name":"embedding","datatype":"FP32","shape":[1,2],"parameters":{"binary_data_size":8}}]}`
	body := append([]byte(header), 0, 0, 0x80, 0x3f, 0, 0, 0x20, 0xc0)
	h := http.Header{}
	h.Set(densewire.HeaderInferenceHeaderContentLength, strconv.Itoa(len(header)))
	r, err := densewire.DecodeKServe(h, body)
	if err != nil {
		log.Fatal(err)
	}
	t, meta, _ := r.Embeddings("embedding") // t.Data aliases body: no copy
	v, _ := t.Float32()
	fmt.Println(meta.Model, t.DType, t.N, t.D, v)
	// Output:
	// m float32 1 2 [1 -2.5]
}

func ExampleRaggedTensor() {
	// two inputs of 2 and 1 tokens, d = 2: the rows are one buffer, the offsets say where each starts
	rows := densewire.Float32Bytes([]float32{1, 2, 3, 4, 5, 6})
	t, err := densewire.NewRaggedTensor(densewire.Float32, 2, []uint32{0, 2, 3}, rows)
	if err != nil {
		log.Fatal(err)
	}
	h := http.Header{}
	body := densewire.EncodeRaggedRaw(h, t, nil) // offsets, padding to 8 bytes, rows
	back, _, err := densewire.DecodeRaggedRaw(h, body)
	if err != nil {
		log.Fatal(err)
	}
	m, _ := back.Matrix(1).Float32() // matrix 1 aliases the body's rows
	fmt.Println(h.Get("Densewire-Shape"), back.Offsets, m)
	// Output:
	// 2,2 [0 2 3] [5 6]
}

// EmbedSparse against a server answering TEI's /embed_sparse with densewire's sparse raw body.
func ExampleClient_EmbedSparse() {
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t, _ := densewire.NewSparseTensor(densewire.Float32, 30522, []uint32{0, 2}, []uint32{2088, 7592},
			densewire.Float32Bytes([]float32{1.25, 0.5}))
		body := densewire.EncodeSparseRaw(w.Header(), t, nil)
		w.Header().Set("Content-Type", densewire.MediaRaw)
		_, _ = w.Write(body)
	}))
	defer server.Close()
	client := &densewire.Client{BaseURL: server.URL}
	s, _, err := client.EmbedSparse(context.Background(), &densewire.SparseRequest{Inputs: []string{"hello world"}})
	if err != nil {
		log.Fatal(err)
	}
	indices, values := s.Vector(0)
	weights, _ := densewire.ViewFloat32(values)
	fmt.Println(s.N, s.V, indices, weights)
	// Output: 1 30522 [2088 7592] [1.25 0.5]
}
