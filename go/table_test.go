package densewire_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	densewire "github.com/densewire/densewire/go"
	_ "github.com/densewire/densewire/go/arrowipc"
	"github.com/densewire/densewire/go/densewirepb"
)

// randomTable builds a table of every column type with random values (NaN payloads, -0.0,
// extreme integers, multi-byte strings included).
func randomTable(r *rand.Rand, rows int) *densewire.Table {
	t := &densewire.Table{Name: "random é", Rows: rows}
	specs := []densewire.ColumnSpec{
		{Name: "flag", Type: densewire.ColumnBool},
		{Name: "i32", Type: densewire.ColumnInt32},
		{Name: "i64", Type: densewire.ColumnInt64},
		{Name: "f32", Type: densewire.ColumnFloat32},
		{Name: "f64", Type: densewire.ColumnFloat64},
		{Name: "text, \"quoted\"", Type: densewire.ColumnString},
		{Name: "id", Type: densewire.ColumnUUID},
		{Name: "v", Type: densewire.ColumnFloat32Vector, Dimensions: 1 + r.IntN(5)},
	}
	words := []string{"", "a", " b ", "ü✓", "x,y", "line\r\nbreak", "\"q\""}
	for _, s := range specs {
		c := densewire.Column{ColumnSpec: s}
		if s.Type == densewire.ColumnString {
			for i := 0; i < rows; i++ {
				c.Strings = append(c.Strings, words[r.IntN(len(words))]+words[r.IntN(len(words))])
			}
		} else {
			c.Data = make([]byte, rows*s.Width())
			for i := range c.Data {
				c.Data[i] = byte(r.Uint32())
			}
			if s.Type == densewire.ColumnBool {
				for i := range c.Data {
					c.Data[i] &= 1
				}
			}
		}
		t.Columns = append(t.Columns, c)
	}
	return t
}

// finite replaces the NaNs and infinities of the float columns (JSON cannot carry them), or with
// onlyNaN the NaNs by the canonical quiet NaN (CSV writes every NaN as "NaN").
func finite(t *densewire.Table, onlyNaN bool) {
	for i := range t.Columns {
		c := &t.Columns[i]
		switch c.Type {
		case densewire.ColumnFloat32, densewire.ColumnFloat32Vector:
			for j := 0; j+4 <= len(c.Data); j += 4 {
				if x := math.Float32frombits(binary.LittleEndian.Uint32(c.Data[j:])); onlyNaN && x != x {
					binary.LittleEndian.PutUint32(c.Data[j:], 0x7FC00000)
				} else if !onlyNaN && (math.IsNaN(float64(x)) || math.IsInf(float64(x), 0)) {
					binary.LittleEndian.PutUint32(c.Data[j:], math.Float32bits(1.5))
				}
			}
		case densewire.ColumnFloat64:
			for j := 0; j+8 <= len(c.Data); j += 8 {
				if x := math.Float64frombits(binary.LittleEndian.Uint64(c.Data[j:])); onlyNaN && x != x {
					binary.LittleEndian.PutUint64(c.Data[j:], 0x7FF8000000000000)
				} else if !onlyNaN && (math.IsNaN(x) || math.IsInf(x, 0)) {
					binary.LittleEndian.PutUint64(c.Data[j:], math.Float64bits(-2.25))
				}
			}
		}
	}
}

func toPBTable(t *densewire.Table, enc densewire.ColumnEncoding) *densewirepb.Table {
	msg := &densewirepb.Table{Name: t.Name, Rows: uint64(t.Rows)}
	for _, c := range t.Columns {
		pc := &densewirepb.Column{Name: c.Name, Type: densewirepb.ColumnType(c.Type), Dimensions: uint32(c.Dimensions)}
		if c.Type == densewire.ColumnString {
			for _, s := range c.Strings {
				pc.Data = append(pc.Data, s...)
				pc.Lengths = append(pc.Lengths, uint32(len(s)))
			}
		} else {
			pc.Data = append([]byte(nil), c.Data...)
			if enc == densewire.EncodingByteStreamSplit && c.Type != densewire.ColumnBool {
				pc.Encoding = densewirepb.ColumnEncoding_COLUMN_ENCODING_BYTE_STREAM_SPLIT
				w := c.Width()
				if c.Type == densewire.ColumnFloat32Vector {
					w = 4
				}
				m := len(c.Data) / w
				for i := 0; i < m; i++ { // the definition, byte by byte
					for k := 0; k < w; k++ {
						pc.Data[k*m+i] = c.Data[i*w+k]
					}
				}
			}
		}
		msg.Columns = append(msg.Columns, pc)
	}
	return msg
}

// Random tables through every format: the binary encoders give proto.Marshal's bytes, and every
// format decodes back to the same bits (JSON after replacing non-finite floats).
func TestTableRoundTripEveryFormat(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, rows := range []int{0, 1, 2, 7, 8, 9, 63, 64, 65, 300} {
		tbl := randomTable(r, rows)
		for _, enc := range []densewire.ColumnEncoding{densewire.EncodingPlain, densewire.EncodingByteStreamSplit} {
			ours, err := densewire.EncodeTableProtobuf(tbl, enc)
			if err != nil {
				t.Fatal(err)
			}
			official, err := proto.MarshalOptions{Deterministic: true}.Marshal(toPBTable(tbl, enc))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(ours, official) {
				t.Fatalf("rows %d encoding %d: EncodeTableProtobuf differs from proto.Marshal", rows, enc)
			}
			back, err := densewire.DecodeTableProtobuf(ours)
			if err != nil {
				t.Fatal(err)
			}
			sameTable(t, "protobuf "+strconv.Itoa(int(enc)), back, tbl)
		}
		for _, f := range densewire.AllTableFormats {
			src := tbl
			switch f {
			case densewire.TableJSON, densewire.TableJSONRows, densewire.TableJSONColumns:
				src = randomTable(rand.New(rand.NewPCG(uint64(rows), 1)), rows)
				finite(src, false)
			case densewire.TableCSV:
				src = randomTable(rand.New(rand.NewPCG(uint64(rows), 2)), rows)
				finite(src, true)
			}
			body, err := densewire.EncodeTable(f, src)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			h := http.Header{}
			densewire.SetTableHeaders(h, src)
			h.Set("Content-Type", f.MediaType())
			back, err := densewire.DecodeTableResponse(h, body)
			if err != nil {
				t.Fatalf("%s rows %d: %v\n%.300s", f, rows, err, body)
			}
			sameTable(t, f.String(), back, src)
		}
	}
}

// The 8x8-transposing byte-stream-split decoder against the definition, for every width and
// lengths around the 8-item blocks.
func TestByteStreamSplitWidths(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, spec := range []densewire.ColumnSpec{{Type: densewire.ColumnInt32}, {Type: densewire.ColumnInt64},
		{Type: densewire.ColumnUUID}, {Type: densewire.ColumnFloat32Vector, Dimensions: 3}} {
		for _, rows := range []int{1, 7, 8, 9, 15, 16, 17, 100} {
			spec.Name = "c"
			tbl := &densewire.Table{Name: "t", Rows: rows, Columns: []densewire.Column{{ColumnSpec: spec, Data: make([]byte, rows*spec.Width())}}}
			for i := range tbl.Columns[0].Data {
				tbl.Columns[0].Data[i] = byte(r.Uint32())
			}
			body, err := proto.Marshal(toPBTable(tbl, densewire.EncodingByteStreamSplit))
			if err != nil {
				t.Fatal(err)
			}
			got, err := densewire.DecodeTableProtobuf(body)
			if err != nil {
				t.Fatal(err)
			}
			sameTable(t, spec.TypeName()+" rows "+strconv.Itoa(rows), got, tbl)
		}
	}
}

func TestColumnsHeader(t *testing.T) {
	cols, err := densewire.ParseColumnsHeader("a%2Cb=int32,v=float32[384],%C3%A9=uuid")
	if err != nil {
		t.Fatal(err)
	}
	want := []densewire.ColumnSpec{{Name: "a,b", Type: densewire.ColumnInt32}, {Name: "v", Type: densewire.ColumnFloat32Vector, Dimensions: 384},
		{Name: "é", Type: densewire.ColumnUUID}}
	for i := range want {
		if cols[i] != want[i] {
			t.Fatalf("%+v, want %+v", cols, want)
		}
	}
	if got := densewire.FormatColumnsHeader(want); got != "a%2Cb=int32,v=float32[384],%C3%A9=uuid" {
		t.Fatal(got)
	}
	for value, cat := range map[string]densewire.Category{
		"a=int32,b":         densewire.InvalidField,
		"a%2=int32":         densewire.InvalidField,
		"a%zz=int32":        densewire.InvalidField,
		"=int32":            densewire.InvalidField,
		"a=int32,a=bool":    densewire.InvalidField,
		"a=decimal":         densewire.UnknownDType,
		"a=float32[0]":      densewire.UnknownDType,
		"a=float32[07]":     densewire.UnknownDType,
		"a=Float32":         densewire.UnknownDType,
		"a=float32[3":       densewire.UnknownDType,
		"a=float32[-1]":     densewire.UnknownDType,
		"a=int32,b=float16": densewire.UnknownDType,
	} {
		_, err := densewire.ParseColumnsHeader(value)
		var e *densewire.Error
		if !errors.As(err, &e) || e.Category != cat || e.Field != "Densewire-Columns" {
			t.Errorf("%q: %v, want %s on Densewire-Columns", value, err, cat)
		}
	}
}

func TestColumnAccessors(t *testing.T) {
	tbl := randomTable(rand.New(rand.NewPCG(1, 2)), 5)
	// take the values from a Protobuf body: plain columns alias the body at odd offsets, so the
	// accessors must copy there and agree with the aligned originals
	body, _ := densewire.EncodeTableProtobuf(tbl, densewire.EncodingPlain)
	dec, err := densewire.DecodeTableProtobuf(append([]byte{0}, body...)[1:])
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []*densewire.Table{tbl, dec} {
		i32, err := x.Column("i32").Int32()
		if err != nil || len(i32) != 5 || i32[3] != int32(binary.LittleEndian.Uint32(tbl.Columns[1].Data[12:])) {
			t.Fatalf("Int32: %v %v", i32, err)
		}
		f64, err := x.Column("f64").Float64()
		if err != nil || math.Float64bits(f64[4]) != binary.LittleEndian.Uint64(tbl.Columns[4].Data[32:]) {
			t.Fatalf("Float64: %v %v", f64, err)
		}
		ids, err := x.Column("id").UUIDs()
		if err != nil || densewire.FormatUUID(ids[2]) != densewire.FormatUUID([16]byte(tbl.Columns[6].Data[32:48])) {
			t.Fatalf("UUIDs: %v", err)
		}
		v, d, err := x.Column("v").Vectors()
		if err != nil || len(v) != 5*d || d != tbl.Columns[7].Dimensions {
			t.Fatalf("Vectors: %v %d %v", v, d, err)
		}
		b, err := x.Column("flag").Bools()
		if err != nil || len(b) != 5 || b[0] != (tbl.Columns[0].Data[0] == 1) {
			t.Fatalf("Bools: %v %v", b, err)
		}
		if _, err := x.Column("i32").Float64(); !errors.Is(err, densewire.InvalidField) {
			t.Fatalf("Float64 of an int32 column: %v", err)
		}
		if _, err := x.Column("nope").Int32(); !errors.Is(err, densewire.InvalidField) {
			t.Fatalf("a missing column: %v", err)
		}
		tensor, err := x.Column("v").Tensor()
		if err != nil || tensor.N != 5 || tensor.D != d {
			t.Fatalf("Tensor: %v", err)
		}
	}
	if u, ok := densewire.ParseUUID("7C9E6679-7425-40DE-944B-E07FC1F90AE7"); !ok || densewire.FormatUUID(u) != "7c9e6679-7425-40de-944b-e07fc1f90ae7" {
		t.Fatal("uppercase uuid")
	}
}

// Errors beyond the golden cases: each names its place.
func TestTableDecodeErrors(t *testing.T) {
	cols := []densewire.ColumnSpec{{Name: "a", Type: densewire.ColumnInt32}, {Name: "v", Type: densewire.ColumnFloat32Vector, Dimensions: 2}}
	for _, tc := range []struct {
		name  string
		run   func() error
		cat   densewire.Category
		field string
	}{
		{"objects unknown key", func() error {
			_, err := densewire.DecodeTableJSON([]byte(`[{"a":1,"v":[1,2],"x":3}]`), "t", cols)
			return err
		}, densewire.InvalidField, "[0].x"},
		{"objects repeated key", func() error {
			_, err := densewire.DecodeTableJSON([]byte(`[{"a":1,"a":2,"v":[1,2]}]`), "t", cols)
			return err
		}, densewire.InvalidField, "[0].a"},
		{"objects keys in any order", func() error {
			tbl, err := densewire.DecodeTableJSON([]byte(`[{"v":[1,2],"a":7}]`), "t", cols)
			if err == nil {
				if v, _ := tbl.Column("a").Int32(); v[0] != 7 {
					return errors.New("wrong value")
				}
			}
			return err
		}, "", ""},
		{"objects not an array", func() error {
			_, err := densewire.DecodeTableJSON([]byte(`{}`), "t", cols)
			return err
		}, densewire.Malformed, ""},
		{"objects vector item", func() error {
			_, err := densewire.DecodeTableJSON([]byte(`[{"a":1,"v":[1,"x"]}]`), "t", cols)
			return err
		}, densewire.InvalidField, "[0].v[1]"},
		{"objects int with fraction", func() error {
			_, err := densewire.DecodeTableJSON([]byte(`[{"a":1.5,"v":[1,2]}]`), "t", cols)
			return err
		}, densewire.InvalidField, "[0].a"},
		{"objects null", func() error {
			_, err := densewire.DecodeTableJSON([]byte(`[{"a":null,"v":[1,2]}]`), "t", cols)
			return err
		}, densewire.InvalidField, "[0].a"},
		{"objects huge vector schema", func() error {
			_, err := densewire.DecodeTableJSON([]byte(`[{},{},{}]`), "t", []densewire.ColumnSpec{{Name: "v", Type: densewire.ColumnFloat32Vector, Dimensions: 1 << 24}})
			return err
		}, densewire.ShapeMismatch, ""},
		{"csv bad vector", func() error {
			_, err := densewire.DecodeTableCSV([]byte("a,v\r\n1,\"[1,2,3]\"\r\n"), "t", cols)
			return err
		}, densewire.InvalidField, "line 2, v"},
		{"csv int32 out of range", func() error {
			_, err := densewire.DecodeTableCSV([]byte("a,v\n1,\"[1,2]\"\n2147483648,\"[1,2]\"\n"), "t", cols)
			return err
		}, densewire.InvalidField, "line 3, a"},
		{"csv text after a quote", func() error {
			_, err := densewire.DecodeTableCSV([]byte("a,v\r\n\"1\"x,\"[1,2]\"\r\n"), "t", cols)
			return err
		}, densewire.Malformed, "line 2"},
		{"csv LF and no final break", func() error {
			tbl, err := densewire.DecodeTableCSV([]byte("a,v\n1,\"[1, 2]\"\n2,[3;4]"), "t", cols)
			if err == nil {
				return errors.New("accepted [3;4]")
			}
			_ = tbl
			return err
		}, densewire.InvalidField, "line 3, v"},
		{"rows missing columns", func() error {
			_, err := densewire.DecodeTableJSONRows([]byte(`{"name":"t","rows":[]}`))
			return err
		}, densewire.InvalidField, "columns"},
		{"columns rows not integer", func() error {
			_, err := densewire.DecodeTableJSONColumns([]byte(`{"name":"t","rows":-1,"columns":[]}`))
			return err
		}, densewire.InvalidField, "rows"},
		{"protobuf duplicate column", func() error {
			_, err := densewire.DecodeTableProtobuf([]byte("\x1a\x05\x0a\x01x\x10\x02\x1a\x05\x0a\x01x\x10\x02"))
			return err
		}, densewire.InvalidField, "columns[1].name"},
		{"protobuf dimensions on int32", func() error {
			_, err := densewire.DecodeTableProtobuf([]byte("\x1a\x07\x0a\x01x\x10\x02\x18\x01"))
			return err
		}, densewire.InvalidField, "columns[0].dimensions"},
		{"protobuf string split mid-character", func() error {
			// "é" (2 bytes) cut into lengths 1 and 1
			_, err := densewire.DecodeTableProtobuf([]byte("\x10\x02\x1a\x0d\x0a\x01s\x10\x06\x2a\x02\xc3\xa9\x32\x02\x01\x01"))
			return err
		}, densewire.Malformed, "columns[0].data"},
		{"protobuf wrong wire type", func() error {
			_, err := densewire.DecodeTableProtobuf([]byte("\x08\x01"))
			return err
		}, densewire.Malformed, ""},
		{"msgpack bool byte", func() error {
			tbl := &densewire.Table{Name: "t", Rows: 1, Columns: []densewire.Column{{ColumnSpec: densewire.ColumnSpec{Name: "b", Type: densewire.ColumnBool}, Data: []byte{1}}}}
			body, _ := densewire.EncodeTableMsgpack(tbl)
			body[len(body)-1] = 7
			_, err := densewire.DecodeTableMsgpack(body)
			return err
		}, densewire.InvalidField, "columns[0].data[0]"},
		{"msgpack trailing bytes", func() error {
			tbl := &densewire.Table{Name: "t"}
			body, _ := densewire.EncodeTableMsgpack(tbl)
			_, err := densewire.DecodeTableMsgpack(append(body, 0))
			return err
		}, densewire.Malformed, ""},
		{"encode NaN in a vector as JSON", func() error {
			tbl := &densewire.Table{Name: "t", Rows: 1, Columns: []densewire.Column{{ColumnSpec: densewire.ColumnSpec{Name: "v", Type: densewire.ColumnFloat32Vector, Dimensions: 2},
				Data: densewire.Float32Bytes([]float32{1, float32(math.Inf(1))})}}}
			_, err := densewire.EncodeTableJSON(tbl, densewire.TableJSONColumns)
			return err
		}, densewire.NonFinite, "v[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			if tc.cat == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var e *densewire.Error
			if !errors.As(err, &e) || e.Category != tc.cat || e.Field != tc.field {
				t.Fatalf("%v (%#v), want %s on %q", err, e, tc.cat, tc.field)
			}
			if !strings.Contains(e.Error(), string(tc.cat)) && e.Message == "" {
				t.Fatalf("no message: %v", e)
			}
		})
	}
}

// DecodeTableResponse checks the headers against a typed body.
func TestDecodeTableResponseHeaders(t *testing.T) {
	tbl := randomTable(rand.New(rand.NewPCG(3, 3)), 4)
	body, _ := densewire.EncodeTableMsgpack(tbl)
	h := http.Header{}
	densewire.SetTableHeaders(h, tbl)
	h.Set("Content-Type", "application/x-msgpack")
	if _, err := densewire.DecodeTableResponse(h, body); err != nil {
		t.Fatal(err)
	}
	h.Set("Densewire-Rows", "5")
	if _, err := densewire.DecodeTableResponse(h, body); !errors.Is(err, densewire.InvalidField) {
		t.Fatalf("rows disagree: %v", err)
	}
	h.Set("Densewire-Rows", "4")
	h.Set("Densewire-Columns", strings.Replace(h.Get("Densewire-Columns"), "i64=int64", "i64=int32", 1))
	if _, err := densewire.DecodeTableResponse(h, body); !errors.Is(err, densewire.InvalidField) {
		t.Fatalf("types disagree: %v", err)
	}
	h.Set("Content-Type", "text/csv")
	h.Del("Densewire-Columns")
	if _, err := densewire.DecodeTableResponse(h, body); !errors.Is(err, densewire.InvalidField) {
		t.Fatalf("CSV without columns: %v", err)
	}
	h.Set("Content-Type", "application/octet-stream")
	if _, err := densewire.DecodeTableResponse(h, body); !errors.Is(err, densewire.UnsupportedMediaType) {
		t.Fatalf("not a table type: %v", err)
	}
}
