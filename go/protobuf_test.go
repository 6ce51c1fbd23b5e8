package densewire_test

import (
	"bytes"
	"encoding/hex"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	densewire "github.com/densewire/densewire/go"
	"github.com/densewire/densewire/go/densewirepb"
)

// toPB builds the generated message for a tensor (and meta).
func toPB(t *densewire.Tensor, meta *densewire.Meta) proto.Message {
	pt := &densewirepb.Tensor{Dtype: densewirepb.DType(t.DType), Shape: []uint64{uint64(t.N), uint64(t.D)}, Data: t.Data}
	if meta == nil {
		return pt
	}
	return &densewirepb.EmbeddingsResponse{Model: meta.Model, Embeddings: pt,
		Usage: &densewirepb.Usage{PromptTokens: meta.PromptTokens, TotalTokens: meta.TotalTokens}, Quantization: meta.Quantization}
}

// The official serializer, in deterministic mode, writes exactly the golden bytes and our bytes;
// proto.Unmarshal reads the golden bodies to the same tensor.
func TestProtobufMatchesOfficialSerializer(t *testing.T) {
	n := 0
	for _, c := range loadGolden(t) {
		if c.file != "tensors" && c.Operation != "envelope" || c.Direction != "" || c.Format != "protobuf" { // quantization.json: the id in field 4
			continue
		}
		n++
		want := expected(t, &c)
		meta := expectedMeta(&c)
		golden, _ := hex.DecodeString(*c.EncodedHex)
		official, err := proto.MarshalOptions{Deterministic: true}.Marshal(toPB(want, meta))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(official, golden) {
			t.Errorf("%s: proto.Marshal gives\n%x, golden is\n%x", c.ID, official, golden)
		}
		var msg proto.Message = &densewirepb.Tensor{}
		if meta != nil {
			msg = &densewirepb.EmbeddingsResponse{}
		}
		if err := proto.Unmarshal(golden, msg); err != nil {
			t.Fatalf("%s: %v", c.ID, err)
		}
		if !proto.Equal(msg, toPB(want, meta)) {
			t.Errorf("%s: proto.Unmarshal gives %v", c.ID, msg)
		}
	}
	if n == 0 {
		t.Fatal("no protobuf golden cases")
	}
	r := rand.New(rand.NewPCG(7, 8))
	for i := 0; i < 200; i++ {
		dt := densewire.DType(1 + r.IntN(7))
		rows, d := r.IntN(5), r.IntN(40)
		data := make([]byte, rows*dt.RowBytes(d))
		for j := range data {
			data[j] = byte(r.Uint32())
		}
		tensor, _ := densewire.NewTensor(dt, rows, d, data)
		var meta *densewire.Meta
		if i%2 == 1 {
			meta = &densewire.Meta{Model: "model-" + string(rune('a'+r.IntN(26))), PromptTokens: r.Uint64N(1 << 20), TotalTokens: r.Uint64N(3)}
			if i%4 == 1 {
				meta.Model = ""
			}
			if i%3 == 0 {
				meta.Quantization = "0123456789abcdef"
			}
		}
		official, _ := proto.MarshalOptions{Deterministic: true}.Marshal(toPB(tensor, meta))
		if ours := densewire.EncodeProtobuf(tensor, meta); !bytes.Equal(ours, official) {
			t.Fatalf("%+v %+v:\n ours %x\n official %x", tensor, meta, ours, official)
		}
	}
}

func pbf(num protowire.Number, typ protowire.Type, v any) []byte {
	b := protowire.AppendTag(nil, num, typ)
	switch x := v.(type) {
	case uint64:
		return protowire.AppendVarint(b, x)
	case []byte:
		return protowire.AppendBytes(b, x)
	case nil:
		return b
	}
	panic("pbf")
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestDecodeProtobufTensorCases(t *testing.T) {
	data := []byte{0, 0, 0x80, 0x3f}
	dtype := pbf(1, protowire.VarintType, uint64(1))
	packed := pbf(2, protowire.BytesType, []byte{1, 1})
	dataF := pbf(3, protowire.BytesType, data)
	tests := []struct {
		name   string
		body   []byte
		err    densewire.Category
		field  string
		offset int
	}{
		{"canonical", cat(dtype, packed, dataF), "", "", 0},
		{"unpacked shape", cat(dtype, pbf(2, protowire.VarintType, uint64(1)), pbf(2, protowire.VarintType, uint64(1)), dataF), "", "", 0},
		{"fields out of order, unknown fields", cat(dataF, pbf(9, protowire.BytesType, []byte("x")), pbf(10, protowire.Fixed32Type, nil), []byte{1, 2, 3, 4}, packed, dtype), "", "", 0},
		{"enum beyond int32 keeps low bits", cat(pbf(1, protowire.VarintType, uint64(1<<32|1)), packed, dataF), "", "", 0},
		{"dtype zero", cat(pbf(1, protowire.VarintType, uint64(0)), packed, dataF), densewire.InvalidField, "dtype", -2},
		{"dtype 8", cat(pbf(1, protowire.VarintType, uint64(8)), packed, dataF), densewire.UnknownDType, "dtype", -2},
		{"three shape entries", cat(dtype, pbf(2, protowire.BytesType, []byte{1, 1, 1}), dataF), densewire.InvalidField, "shape", -2},
		{"bad varint in packed shape", cat(dtype, pbf(2, protowire.BytesType, []byte{1, 0x80}), dataF), densewire.Malformed, "shape", 2},
		{"dtype as bytes", cat(pbf(1, protowire.BytesType, []byte{1}), packed, dataF), densewire.Malformed, "", 0},
		{"field number zero", cat(dtype, []byte{0x00, 0x01}), densewire.Malformed, "", 2},
		{"end group without start", cat(dtype, []byte{0x0c}), densewire.Malformed, "", 2},
		{"truncated unknown field", cat(dtype, packed, dataF, []byte{0x4a, 0x05, 1}), densewire.Truncated, "", -1},
		{"truncated tag", cat(dtype, []byte{0x80}), densewire.Truncated, "", -1},
		{"empty data when shape says none", cat(dtype, pbf(2, protowire.BytesType, []byte{0, 7})), "", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := densewire.DecodeProtobufTensor(tt.body)
			e := checkErr(t, err, tt.err, tt.field)
			if tt.err == "" {
				if got.DType != densewire.Float32 || (got.N == 1 && !bytes.Equal(got.Data, data)) {
					t.Fatalf("%+v", got)
				}
				return
			}
			switch {
			case tt.offset == -1 && e.Offset != len(tt.body):
				t.Fatalf("truncated offset %d, want %d", e.Offset, len(tt.body))
			case tt.offset >= 0 && e.Offset != tt.offset:
				t.Fatalf("offset %d, want %d (%v)", e.Offset, tt.offset, e)
			}
		})
	}
}

func TestDecodeProtobufEmbeddings(t *testing.T) {
	tensor, _ := densewire.NewTensor(densewire.Float32, 1, 1, []byte{0, 0, 0x80, 0x3f})
	meta := &densewire.Meta{Model: "m", PromptTokens: 2, TotalTokens: 3}
	body := densewire.EncodeProtobuf(tensor, meta)
	got, gotMeta, err := densewire.DecodeProtobuf(body)
	if err != nil || got.N != 1 || *gotMeta != *meta {
		t.Fatalf("%+v %+v %v", got, gotMeta, err)
	}
	// a second embeddings field merges into the first, as protobuf merges messages
	extra := pbf(2, protowire.BytesType, cat(pbf(1, protowire.VarintType, uint64(6)), pbf(3, protowire.BytesType, []byte{7})))
	got, _, err = densewire.DecodeProtobuf(cat(body, extra))
	if err != nil || got.DType != densewire.Uint8 || got.N != 1 || got.D != 1 || got.Data[0] != 7 {
		t.Fatalf("merge: %+v %v", got, err)
	}
	// an inner length past the end of its enclosing field, the body being complete: malformed
	inner := cat(pbf(1, protowire.VarintType, uint64(1)), []byte{0x1a, 0x09, 1})
	bad := cat(pbf(2, protowire.BytesType, inner), pbf(3, protowire.BytesType, nil))
	if _, _, err := densewire.DecodeProtobuf(bad); checkErr(t, err, densewire.Malformed, "").Offset != 4 {
		t.Fatalf("inner overrun: %v", err)
	}
	// the body cut inside the embeddings field: truncated
	if _, _, err := densewire.DecodeProtobuf(body[:10]); checkErr(t, err, densewire.Truncated, "").Offset != 10 {
		t.Fatalf("cut: %v", err)
	}
	if _, _, err := densewire.DecodeProtobuf(pbf(1, protowire.BytesType, []byte("m"))); err == nil {
		t.Fatal("missing embeddings accepted")
	} else {
		checkErr(t, err, densewire.InvalidField, "embeddings")
	}
	if _, _, err := densewire.DecodeProtobuf(cat(pbf(1, protowire.BytesType, []byte{0xff}), pbf(2, protowire.BytesType, nil))); err == nil {
		t.Fatal("invalid UTF-8 model accepted")
	}
	if _, _, err := densewire.DecodeProtobuf(cat(pbf(3, protowire.VarintType, uint64(1)))); err == nil {
		t.Fatal("usage with wrong wire type accepted")
	}
}
