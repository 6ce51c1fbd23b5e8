package arrowipc_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	densewire "github.com/densewire/densewire/go"
	"github.com/densewire/densewire/go/arrowipc"
)

// goldenArrow loads the Arrow bodies of testdata/golden/tensors.json (the golden test of the core
// package checks them all; here they seed the fuzzer and the schema checks).
func goldenArrow(tb testing.TB) map[string][]byte {
	dir, _ := os.Getwd()
	for {
		p := filepath.Join(dir, "testdata", "golden", "tensors.json")
		if raw, err := os.ReadFile(p); err == nil {
			var f struct {
				Cases []struct {
					ID, Format string
					EncodedHex string `json:"encoded_hex"`
				} `json:"cases"`
			}
			if err := json.Unmarshal(raw, &f); err != nil {
				tb.Fatal(err)
			}
			out := map[string][]byte{}
			for _, c := range f.Cases {
				if c.Format == "arrow" {
					out[c.ID], _ = hex.DecodeString(c.EncodedHex)
				}
			}
			return out
		}
		if filepath.Dir(dir) == dir {
			tb.Fatal("testdata/golden not found")
		}
		dir = filepath.Dir(dir)
	}
}

// Our streams carry the schema of SPEC.md section 10 for every dtype.
func TestEncodeSchema(t *testing.T) {
	wantType := map[densewire.DType]string{
		densewire.Float32: "fixed_size_list<item: float32>[3]", densewire.Float16: "fixed_size_list<item: float16>[3]",
		densewire.BFloat16: "fixed_size_list<item: uint16>[3]", densewire.Float64: "fixed_size_list<item: float64>[3]",
		densewire.Int8: "fixed_size_list<item: int8>[3]", densewire.Uint8: "fixed_size_list<item: uint8>[3]",
		densewire.Binary: "fixed_size_binary[1]",
	}
	for dt, typ := range wantType {
		tensor, _ := densewire.NewTensor(dt, 2, 3, make([]byte, 2*dt.RowBytes(3)))
		body, err := arrowipc.Encode(tensor, &densewire.Meta{Model: "m", PromptTokens: 1, TotalTokens: 2})
		if err != nil {
			t.Fatal(err)
		}
		r, err := ipc.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		s := r.Schema()
		f := s.Field(0)
		if s.NumFields() != 1 || f.Name != "embedding" || f.Nullable || f.Type.String() != typ {
			t.Errorf("%s: schema %v", dt, s)
		}
		if fl, ok := f.Type.(*arrow.FixedSizeListType); ok && fl.ElemField().Nullable {
			t.Errorf("%s: items are nullable", dt)
		}
		md := s.Metadata()
		for k, v := range map[string]string{"densewire.version": "1", "densewire.dtype": dt.String(), "densewire.dimensions": "3",
			"densewire.model": "m", "densewire.prompt_tokens": "1", "densewire.total_tokens": "2"} {
			if i := md.FindKey(k); i < 0 || md.Values()[i] != v {
				t.Errorf("%s: schema metadata %s", dt, k)
			}
		}
		if i := f.Metadata.FindKey("densewire.dtype"); i < 0 || f.Metadata.Values()[i] != dt.String() {
			t.Errorf("%s: field metadata", dt)
		}
		batches := 0
		for r.Next() {
			batches++
			if r.RecordBatch().NumRows() != 2 {
				t.Errorf("%s: rows", dt)
			}
		}
		if batches != 1 || r.Err() != nil {
			t.Errorf("%s: %d batches, %v", dt, batches, r.Err())
		}
		r.Release()
	}
}

// Streams from other writers: no densewire metadata (dtype from the Arrow type), sliced arrays
// (offsets), several batches.
func TestDecodeForeignStreams(t *testing.T) {
	mem := memory.NewGoAllocator()
	typ := arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Float32)
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "embedding", Type: typ}}, nil)
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	lb := b.Field(1).(*array.FixedSizeListBuilder)
	vb := lb.ValueBuilder().(*array.Float32Builder)
	for i := 0; i < 4; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		lb.Append(true)
		vb.AppendValues([]float32{float32(i), -float32(i)}, nil)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(schema))
	w.Write(rec.NewSlice(1, 3)) // rows 1, 2: an offset into the column
	w.Write(rec.NewSlice(3, 4))
	w.Close()
	tensor, meta, err := arrowipc.Decode(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	got, _ := tensor.Float32()
	want := []float32{1, -1, 2, -2, 3, -3}
	if tensor.N != 3 || tensor.D != 2 || meta != nil || len(got) != 6 {
		t.Fatalf("%+v %v %v", tensor, meta, got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%v, want %v", got, want)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	body := goldenArrow(t)["arrow.f32.basic"]
	if body == nil {
		t.Fatal("no golden arrow.f32.basic")
	}
	if _, _, err := arrowipc.Decode(body[:len(body)/2]); !errors.Is(err, densewire.Truncated) && !errors.Is(err, densewire.Malformed) {
		t.Fatalf("cut stream: %v", err)
	}
	if _, _, err := arrowipc.Decode([]byte("not arrow at all")); !errors.Is(err, densewire.Malformed) && !errors.Is(err, densewire.Truncated) {
		t.Fatalf("garbage: %v", err)
	}
	// a stream of a schema and no record batch, with or without the end-of-stream marker
	schema := arrow.NewSchema([]arrow.Field{{Name: "embedding", Type: arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Float32)}}, nil)
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(schema))
	w.Close()
	for _, b := range [][]byte{buf.Bytes(), buf.Bytes()[:buf.Len()-8]} {
		if _, _, err := arrowipc.Decode(b); !errors.Is(err, densewire.Truncated) || err.(*densewire.Error).Offset != len(b) {
			t.Fatalf("no batch: %v", err)
		}
	}
	// the end-of-stream marker is optional
	if _, _, err := arrowipc.Decode(body[:len(body)-8]); err != nil {
		t.Fatalf("without end-of-stream marker: %v", err)
	}
	f32list := arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Float32)
	for _, tt := range []struct {
		name  string
		field arrow.Field
		err   densewire.Category
	}{
		{"no embedding column", arrow.Field{Name: "vector", Type: f32list}, densewire.InvalidField},
		{"metadata dtype disagrees with the type", arrow.Field{Name: "embedding", Type: f32list,
			Metadata: arrow.NewMetadata([]string{"densewire.dtype"}, []string{"float64"})}, densewire.InvalidField},
		{"unknown metadata dtype", arrow.Field{Name: "embedding", Type: f32list,
			Metadata: arrow.NewMetadata([]string{"densewire.dtype"}, []string{"float8"})}, densewire.UnknownDType},
		{"list of strings", arrow.Field{Name: "embedding", Type: arrow.FixedSizeListOf(2, arrow.BinaryTypes.String)}, densewire.InvalidField},
		{"variable-size list", arrow.Field{Name: "embedding", Type: arrow.ListOf(arrow.PrimitiveTypes.Float32)}, densewire.InvalidField},
	} {
		t.Run(tt.name, func(t *testing.T) {
			schema := arrow.NewSchema([]arrow.Field{tt.field}, nil)
			b := array.NewRecordBuilder(memory.NewGoAllocator(), schema)
			defer b.Release()
			rec := b.NewRecordBatch() // zero rows
			defer rec.Release()
			var buf bytes.Buffer
			w := ipc.NewWriter(&buf, ipc.WithSchema(schema))
			if err := w.Write(rec); err != nil {
				t.Fatal(err)
			}
			w.Close()
			if _, _, err := arrowipc.Decode(buf.Bytes()); !errors.Is(err, tt.err) {
				t.Fatalf("got %v, want %s", err, tt.err)
			}
		})
	}
}

func TestRegistered(t *testing.T) {
	if !densewire.ArrowAvailable() {
		t.Fatal("importing arrowipc registers the codec")
	}
	tensor, _ := densewire.NewTensor(densewire.Binary, 1, 12, []byte{0xb3, 0xf0})
	body, err := densewire.Encode(densewire.FormatArrow, tensor, nil, nil, densewire.JSONOptions{})
	if err != nil {
		t.Fatal(err)
	}
	back, _, err := densewire.Decode(densewire.FormatArrow, nil, body)
	if err != nil || back.D != 12 || !bytes.Equal(back.Data, tensor.Data) {
		t.Fatalf("%+v %v", back, err)
	}
}

func FuzzDecodeArrow(f *testing.F) {
	for _, body := range goldenArrow(f) {
		f.Add(body)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		tensor, meta, err := arrowipc.Decode(body)
		if err != nil {
			var e *densewire.Error
			if !errors.As(err, &e) {
				t.Fatalf("%T %v", err, err)
			}
			return
		}
		enc, err := arrowipc.Encode(tensor, meta)
		if err != nil {
			t.Fatal(err)
		}
		again, againMeta, err := arrowipc.Decode(enc)
		if err != nil || !bytes.Equal(again.Data, tensor.Data) || again.N != tensor.N || again.D != tensor.D ||
			(meta == nil) != (againMeta == nil) || meta != nil && *meta != *againMeta {
			t.Fatalf("re-encoded stream differs: %v", err)
		}
	})
}

// goldenArrowTables loads the Arrow bodies of testdata/golden/tables.json.
func goldenArrowTables(tb testing.TB) map[string][]byte {
	dir, _ := os.Getwd()
	for {
		p := filepath.Join(dir, "testdata", "golden", "tables.json")
		if raw, err := os.ReadFile(p); err == nil {
			var f struct {
				Cases []struct {
					ID, Format string
					EncodedHex *string `json:"encoded_hex"`
				}
			}
			if err := json.Unmarshal(raw, &f); err != nil {
				tb.Fatal(err)
			}
			out := map[string][]byte{}
			for _, c := range f.Cases {
				if c.Format == "arrow" && c.EncodedHex != nil {
					b, _ := hex.DecodeString(*c.EncodedHex)
					out[c.ID] = b
				}
			}
			if len(out) == 0 {
				tb.Fatal("no Arrow table cases")
			}
			return out
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("testdata/golden/tables.json not found")
		}
		dir = parent
	}
}

// FuzzDecodeArrowTable: hostile streams give typed errors, never a crash or a huge allocation;
// an accepted table re-encodes to a stream that decodes the same.
func FuzzDecodeArrowTable(f *testing.F) {
	for _, b := range goldenArrowTables(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		tbl, err := arrowipc.DecodeTable(body)
		if err != nil {
			var e *densewire.Error
			if !errors.As(err, &e) || e.Offset < -1 || e.Offset > len(body) {
				t.Fatalf("%T %v", err, err)
			}
			return
		}
		if err := tbl.Validate(); err != nil {
			t.Fatalf("accepted an invalid table: %v", err)
		}
		enc, err := arrowipc.EncodeTable(tbl)
		if err != nil {
			t.Fatal(err)
		}
		again, err := arrowipc.DecodeTable(enc)
		if err != nil {
			t.Fatalf("re-encoded: %v", err)
		}
		if again.Name != tbl.Name || again.Rows != tbl.Rows || len(again.Columns) != len(tbl.Columns) {
			t.Fatalf("re-encoded %+v, was %+v", again, tbl)
		}
		for i := range tbl.Columns {
			a, b := &again.Columns[i], &tbl.Columns[i]
			if a.ColumnSpec != b.ColumnSpec || !bytes.Equal(a.Data, b.Data) || len(a.Strings) != len(b.Strings) {
				t.Fatalf("column %d differs after re-encoding", i)
			}
			for r := range a.Strings {
				if a.Strings[r] != b.Strings[r] {
					t.Fatalf("column %d row %d differs", i, r)
				}
			}
		}
	})
}
