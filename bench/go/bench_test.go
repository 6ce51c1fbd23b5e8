// Package bench measures densewire's Go codecs against the JSON baseline (encoding/json of
// [][]float32) on one tensor of 1000 x 1536 float32 values. Run from bench/go:
//
//	go test -run '^$' -bench . -benchtime 5x -count 6 | tee new.txt
//	benchstat new.txt
//
// Every benchmark reports MB/s of tensor data (6,144,000 bytes of float32 per op, whatever the
// body size) and the body size as body-B; decoders end with a []float32 in hand (a copy, like the
// baseline's [][]float32), the -View variants with a zero-copy view where densewire can give one.
package bench

import (
	"bytes"
	stdb64 "encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"net/http"
	"testing"
	"unsafe"

	simdb64 "github.com/segmentio/asm/base64"
	"google.golang.org/protobuf/proto"

	densewire "github.com/densewire/densewire/go"
	"github.com/densewire/densewire/go/arrowipc"
	"github.com/densewire/densewire/go/densewirepb"
)

const rows, dims = 1000, 1536

var (
	flat, matrix = data()
	tensor, _    = densewire.FromFloat32(flat, rows, dims, densewire.Float32)
	meta         = &densewire.Meta{Model: "bench-model", PromptTokens: 12345, TotalTokens: 12345}
	tensorBytes  = int64(4 * rows * dims)
)

// data is a reproducible embedding-like matrix: values of a unit vector of 1536 dimensions.
func data() ([]float32, [][]float32) {
	r := rand.New(rand.NewPCG(42, 1536))
	flat := make([]float32, rows*dims)
	m := make([][]float32, rows)
	for i := range m {
		row := flat[i*dims : (i+1)*dims]
		var norm float64
		for j := range row {
			row[j] = float32(r.NormFloat64())
			norm += float64(row[j]) * float64(row[j])
		}
		for j := range row {
			row[j] = float32(float64(row[j]) / math.Sqrt(norm))
		}
		m[i] = row
	}
	return flat, m
}

func report(b *testing.B, body int) {
	b.SetBytes(tensorBytes)
	b.ReportMetric(float64(body), "body-B")
}

func mustOK(b *testing.B, err error) {
	if err != nil {
		b.Fatal(err)
	}
}

// ---- the baseline

func BenchmarkEncode_JSONBaseline(b *testing.B) {
	var out []byte
	for b.Loop() {
		out, _ = json.Marshal(matrix)
	}
	report(b, len(out))
}

func BenchmarkDecode_JSONBaseline(b *testing.B) {
	body, _ := json.Marshal(matrix)
	for b.Loop() {
		var m [][]float32
		mustOK(b, json.Unmarshal(body, &m))
	}
	report(b, len(body))
}

// ---- densewire formats

func BenchmarkEncode_JSONFloat(b *testing.B) {
	var out []byte
	for b.Loop() {
		out, _ = densewire.EncodeJSON(tensor, meta, densewire.JSONOptions{})
	}
	report(b, len(out))
}

func BenchmarkDecode_JSONFloat(b *testing.B) {
	body, _ := densewire.EncodeJSON(tensor, meta, densewire.JSONOptions{})
	for b.Loop() {
		t, _, err := densewire.DecodeJSON(body)
		mustOK(b, err)
		_, err = t.Float32()
		mustOK(b, err)
	}
	report(b, len(body))
}

func BenchmarkEncode_JSONBase64(b *testing.B) {
	var out []byte
	for b.Loop() {
		out, _ = densewire.EncodeJSON(tensor, meta, densewire.JSONOptions{EncodingFormat: densewire.EncodingBase64})
	}
	report(b, len(out))
}

func BenchmarkDecode_JSONBase64(b *testing.B) {
	body, _ := densewire.EncodeJSON(tensor, meta, densewire.JSONOptions{EncodingFormat: densewire.EncodingBase64})
	for b.Loop() {
		t, _, err := densewire.DecodeJSON(body)
		mustOK(b, err)
		_, err = t.Float32()
		mustOK(b, err)
	}
	report(b, len(body))
}

func BenchmarkDecode_JSONBase64View(b *testing.B) {
	body, _ := densewire.EncodeJSON(tensor, meta, densewire.JSONOptions{EncodingFormat: densewire.EncodingBase64})
	for b.Loop() {
		t, _, err := densewire.DecodeJSON(body)
		mustOK(b, err)
		if _, ok := t.ViewFloat32(); !ok {
			b.Fatal("no view")
		}
	}
	report(b, len(body))
}

func BenchmarkEncode_Base64(b *testing.B) {
	var s string
	for b.Loop() {
		s = densewire.EncodeBase64(tensor, densewire.LittleEndian)
	}
	report(b, len(s))
}

func BenchmarkDecode_Base64(b *testing.B) {
	s := densewire.EncodeBase64(tensor, densewire.LittleEndian)
	for b.Loop() {
		t, err := densewire.DecodeBase64(s, densewire.Float32, rows, dims, densewire.LittleEndian)
		mustOK(b, err)
		_, err = t.Float32()
		mustOK(b, err)
	}
	report(b, len(s))
}

func BenchmarkDecode_Base64BigEndian(b *testing.B) {
	s := densewire.EncodeBase64(tensor, densewire.BigEndian)
	for b.Loop() {
		t, err := densewire.DecodeBase64(s, densewire.Float32, rows, dims, densewire.BigEndian)
		mustOK(b, err)
		_, err = t.Float32()
		mustOK(b, err)
	}
	report(b, len(s))
}

// The raw body is the tensor's bytes: encoding is setting the headers (the body needs no copy).
func BenchmarkEncode_Raw(b *testing.B) {
	for b.Loop() {
		h := http.Header{}
		densewire.SetRawHeaders(h, tensor, meta)
	}
	report(b, len(tensor.Data))
}

func BenchmarkDecode_Raw(b *testing.B) {
	h := http.Header{}
	densewire.SetRawHeaders(h, tensor, meta)
	body := append([]byte(nil), tensor.Data...)
	for b.Loop() {
		t, _, err := densewire.DecodeRaw(h, body)
		mustOK(b, err)
		_, err = t.Float32()
		mustOK(b, err)
	}
	report(b, len(body))
}

func BenchmarkDecode_RawView(b *testing.B) {
	h := http.Header{}
	densewire.SetRawHeaders(h, tensor, meta)
	body := append([]byte(nil), tensor.Data...)
	for b.Loop() {
		t, _, err := densewire.DecodeRaw(h, body)
		mustOK(b, err)
		if _, ok := t.ViewFloat32(); !ok {
			b.Fatal("no view")
		}
	}
	report(b, len(body))
}

func BenchmarkEncode_Msgpack(b *testing.B) {
	var out []byte
	for b.Loop() {
		out = densewire.EncodeMsgpack(tensor, meta)
	}
	report(b, len(out))
}

func BenchmarkDecode_Msgpack(b *testing.B) {
	body := densewire.EncodeMsgpack(tensor, meta)
	for b.Loop() {
		t, _, err := densewire.DecodeMsgpack(body)
		mustOK(b, err)
		_, err = t.Float32()
		mustOK(b, err)
	}
	report(b, len(body))
}

func BenchmarkEncode_Protobuf(b *testing.B) {
	var out []byte
	for b.Loop() {
		out = densewire.EncodeProtobuf(tensor, meta)
	}
	report(b, len(out))
}

func BenchmarkDecode_Protobuf(b *testing.B) {
	body := densewire.EncodeProtobuf(tensor, meta)
	for b.Loop() {
		t, _, err := densewire.DecodeProtobuf(body)
		mustOK(b, err)
		_, err = t.Float32()
		mustOK(b, err)
	}
	report(b, len(body))
}

func pbMessage() *densewirepb.EmbeddingsResponse {
	return &densewirepb.EmbeddingsResponse{Model: meta.Model,
		Embeddings: &densewirepb.Tensor{Dtype: densewirepb.DType_DTYPE_FLOAT32, Shape: []uint64{rows, dims}, Data: tensor.Data},
		Usage:      &densewirepb.Usage{PromptTokens: meta.PromptTokens, TotalTokens: meta.TotalTokens}}
}

// The generated densewirepb types with proto.Marshal / proto.Unmarshal, for comparison.
func BenchmarkEncode_ProtobufGenerated(b *testing.B) {
	var out []byte
	msg := pbMessage()
	for b.Loop() {
		out, _ = proto.MarshalOptions{Deterministic: true}.Marshal(msg)
	}
	report(b, len(out))
}

func BenchmarkDecode_ProtobufGenerated(b *testing.B) {
	body, _ := proto.Marshal(pbMessage())
	for b.Loop() {
		var msg densewirepb.EmbeddingsResponse
		mustOK(b, proto.Unmarshal(body, &msg))
		t, err := densewire.NewTensor(densewire.DType(msg.Embeddings.Dtype), int(msg.Embeddings.Shape[0]), int(msg.Embeddings.Shape[1]), msg.Embeddings.Data)
		mustOK(b, err)
		_, err = t.Float32()
		mustOK(b, err)
	}
	report(b, len(body))
}

func BenchmarkEncode_Arrow(b *testing.B) {
	var out []byte
	for b.Loop() {
		var err error
		out, err = arrowipc.Encode(tensor, meta)
		mustOK(b, err)
	}
	report(b, len(out))
}

func BenchmarkDecode_Arrow(b *testing.B) {
	body, _ := arrowipc.Encode(tensor, meta)
	for b.Loop() {
		t, _, err := arrowipc.Decode(body)
		mustOK(b, err)
		_, err = t.Float32()
		mustOK(b, err)
	}
	report(b, len(body))
}

// ---- Base64 libraries: encoding/base64 against github.com/segmentio/asm/base64 (AVX2)

var b64Text = stdb64.StdEncoding.EncodeToString(tensor.Data)

func BenchmarkBase64Lib_Decode_Std(b *testing.B) {
	dst := make([]byte, len(tensor.Data))
	src := []byte(b64Text)
	for b.Loop() {
		_, err := stdb64.StdEncoding.Decode(dst, src)
		mustOK(b, err)
	}
	report(b, len(src))
}

func BenchmarkBase64Lib_Decode_SegmentioAsm(b *testing.B) {
	dst := make([]byte, len(tensor.Data))
	src := []byte(b64Text)
	for b.Loop() {
		_, err := simdb64.StdEncoding.Decode(dst, src)
		mustOK(b, err)
	}
	report(b, len(src))
}

func BenchmarkBase64Lib_Encode_Std(b *testing.B) {
	dst := make([]byte, len(b64Text))
	for b.Loop() {
		stdb64.StdEncoding.Encode(dst, tensor.Data)
	}
	report(b, len(dst))
}

func BenchmarkBase64Lib_Encode_SegmentioAsm(b *testing.B) {
	dst := make([]byte, len(b64Text))
	for b.Loop() {
		simdb64.StdEncoding.Encode(dst, tensor.Data)
	}
	report(b, len(dst))
}

// ---- bulk float32 conversion from little-endian bytes

func BenchmarkFloat32Conv_LoopBinaryLE(b *testing.B) {
	dst := make([]float32, rows*dims)
	src := tensor.Data
	for b.Loop() {
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	}
	report(b, len(src))
}

func BenchmarkFloat32Conv_BinaryRead(b *testing.B) {
	dst := make([]float32, rows*dims)
	for b.Loop() {
		mustOK(b, binary.Read(bytes.NewReader(tensor.Data), binary.LittleEndian, dst))
	}
	report(b, len(tensor.Data))
}

func BenchmarkFloat32Conv_BinaryDecode(b *testing.B) {
	dst := make([]float32, rows*dims)
	for b.Loop() {
		_, err := binary.Decode(tensor.Data, binary.LittleEndian, dst)
		mustOK(b, err)
	}
	report(b, len(tensor.Data))
}

func BenchmarkFloat32Conv_MemmoveDensewire(b *testing.B) {
	for b.Loop() {
		_, err := tensor.Float32() // one copy through a byte view of the destination
		mustOK(b, err)
	}
	report(b, len(tensor.Data))
}

func BenchmarkFloat32Conv_ViewDensewire(b *testing.B) {
	for b.Loop() {
		if _, ok := tensor.ViewFloat32(); !ok {
			b.Fatal("no view")
		}
	}
	report(b, len(tensor.Data))
}

func BenchmarkFloat32Conv_Float16Widen(b *testing.B) {
	half, _ := densewire.FromFloat32(flat, rows, dims, densewire.Float16)
	for b.Loop() {
		_, err := half.Float32()
		mustOK(b, err)
	}
	b.SetBytes(int64(len(half.Data)))
}

func BenchmarkFloat32Conv_Float16Narrow(b *testing.B) {
	for b.Loop() {
		_, err := densewire.FromFloat32(flat, rows, dims, densewire.Float16)
		mustOK(b, err)
	}
	report(b, 2*rows*dims)
}

// TestSameData checks that every benchmarked body decodes to the benchmarked tensor.
func TestSameData(t *testing.T) {
	check := func(name string, got *densewire.Tensor, err error) {
		t.Helper()
		if err != nil || got.N != rows || got.D != dims || !bytes.Equal(got.Data, tensor.Data) {
			t.Fatalf("%s: %v", name, err)
		}
	}
	body, _ := densewire.EncodeJSON(tensor, meta, densewire.JSONOptions{})
	got, _, err := densewire.DecodeJSON(body)
	check("json", got, err)
	var m [][]float32
	baseline, _ := json.Marshal(matrix)
	if err := json.Unmarshal(baseline, &m); err != nil || len(m) != rows || m[7][9] != matrix[7][9] {
		t.Fatal("baseline")
	}
	got, _, err = densewire.DecodeMsgpack(densewire.EncodeMsgpack(tensor, meta))
	check("msgpack", got, err)
	got, _, err = densewire.DecodeProtobuf(densewire.EncodeProtobuf(tensor, meta))
	check("protobuf", got, err)
	a, _ := arrowipc.Encode(tensor, meta)
	got, _, err = arrowipc.Decode(a)
	check("arrow", got, err)
	got, err = densewire.DecodeBase64(b64Text, densewire.Float32, rows, dims, densewire.LittleEndian)
	check("base64", got, err)
	var viaSlice []float32
	if v, ok := tensor.ViewFloat32(); ok {
		viaSlice = v
	}
	if len(viaSlice) != rows*dims || unsafe.SliceData(viaSlice) != &flat[0] {
		t.Fatal("FromFloat32 + ViewFloat32 should be zero-copy on this host")
	}
}
