package densewire_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"

	"google.golang.org/protobuf/proto"

	densewire "github.com/densewire/densewire/go"
	"github.com/densewire/densewire/go/arrowipc"
	"github.com/densewire/densewire/go/densewirepb"
)

// The table cases of testdata/golden/tables.json (SPEC.md sections 13 and 15), run by TestGolden.

type goldenColumn struct {
	Name   string            `json:"name"`
	Type   string            `json:"type"`
	Values []json.RawMessage `json:"values"`
}

// expectedTable is the table a case describes: values by their bits.
func expectedTable(t testing.TB, c *goldenCase) *densewire.Table {
	t.Helper()
	if c.Rows == nil {
		t.Fatal("case has no rows")
	}
	tbl := &densewire.Table{Name: c.Table, Rows: *c.Rows}
	for _, gc := range c.Columns {
		typ, d, err := densewire.ParseColumnType(gc.Type)
		if err != nil {
			t.Fatalf("column %s: %v", gc.Name, err)
		}
		col := densewire.Column{ColumnSpec: densewire.ColumnSpec{Name: gc.Name, Type: typ, Dimensions: d}}
		if typ == densewire.ColumnString {
			col.Strings = []string{}
		} else {
			col.Data = []byte{}
		}
		if len(gc.Values) != tbl.Rows {
			t.Fatalf("column %s has %d values for %d rows", gc.Name, len(gc.Values), tbl.Rows)
		}
		for _, raw := range gc.Values {
			var s string
			switch typ {
			case densewire.ColumnBool:
				var b bool
				mustJSON(t, raw, &b)
				if b {
					col.Data = append(col.Data, 1)
				} else {
					col.Data = append(col.Data, 0)
				}
				continue
			case densewire.ColumnFloat32Vector:
				var items []string
				mustJSON(t, raw, &items)
				if len(items) != d {
					t.Fatalf("column %s: a vector of %d items", gc.Name, len(items))
				}
				col.Data = append(col.Data, itemsLE(t, items)...)
				continue
			}
			mustJSON(t, raw, &s)
			switch typ {
			case densewire.ColumnInt32, densewire.ColumnInt64:
				bits := 32
				if typ == densewire.ColumnInt64 {
					bits = 64
				}
				v, err := strconv.ParseInt(s, 10, bits)
				if err != nil {
					t.Fatal(err)
				}
				for i := 0; i < bits/8; i++ {
					col.Data = append(col.Data, byte(uint64(v)>>(8*i)))
				}
			case densewire.ColumnFloat32, densewire.ColumnFloat64:
				col.Data = append(col.Data, itemsLE(t, []string{s})...)
			case densewire.ColumnString:
				col.Strings = append(col.Strings, s)
			case densewire.ColumnUUID:
				u, ok := densewire.ParseUUID(s)
				if !ok {
					t.Fatalf("bad uuid %q", s)
				}
				col.Data = append(col.Data, u[:]...)
			}
		}
		tbl.Columns = append(tbl.Columns, col)
	}
	if err := tbl.Validate(); err != nil {
		t.Fatalf("golden table is not valid: %v", err)
	}
	return tbl
}

func mustJSON(t testing.TB, raw json.RawMessage, v any) {
	t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
}

// sameTable compares name, rows, column specs and every value by its bits.
func sameTable(t testing.TB, what string, got, want *densewire.Table) {
	t.Helper()
	if got == nil {
		t.Fatalf("%s: nil table", what)
	}
	if got.Name != want.Name || got.Rows != want.Rows || len(got.Columns) != len(want.Columns) {
		t.Fatalf("%s: table %q of %d rows and %d columns, want %q of %d and %d", what, got.Name, got.Rows, len(got.Columns),
			want.Name, want.Rows, len(want.Columns))
	}
	for i := range want.Columns {
		g, w := &got.Columns[i], &want.Columns[i]
		if g.ColumnSpec != w.ColumnSpec {
			t.Fatalf("%s: column %d is %+v, want %+v", what, i, g.ColumnSpec, w.ColumnSpec)
		}
		if w.Type == densewire.ColumnString {
			if len(g.Strings) != len(w.Strings) {
				t.Fatalf("%s: column %s has %d strings, want %d", what, w.Name, len(g.Strings), len(w.Strings))
			}
			for r := range w.Strings {
				if g.Strings[r] != w.Strings[r] {
					t.Fatalf("%s: %s[%d] = %q, want %q", what, w.Name, r, g.Strings[r], w.Strings[r])
				}
			}
			continue
		}
		if !bytes.Equal(g.Data, w.Data) {
			t.Fatalf("%s: column %s\n got %x\nwant %x", what, w.Name, g.Data, w.Data)
		}
	}
}

func goldenBody(t testing.TB, c *goldenCase) []byte {
	t.Helper()
	switch {
	case c.EncodedHex != nil:
		return mustHex(t, *c.EncodedHex)
	case c.EncodedText != nil:
		return []byte(*c.EncodedText)
	case c.InputHex != nil:
		return mustHex(t, *c.InputHex)
	case c.InputText != nil:
		return []byte(*c.InputText)
	}
	t.Fatal("case has no body")
	return nil
}

func columnEncoding(t testing.TB, name string) densewire.ColumnEncoding {
	switch name {
	case "plain":
		return densewire.EncodingPlain
	case "byte_stream_split":
		return densewire.EncodingByteStreamSplit
	}
	t.Fatalf("unknown column_encoding %q", name)
	return 0
}

var tableFormatOfCase = map[string]densewire.TableFormat{
	"json": densewire.TableJSON, "json-rows": densewire.TableJSONRows, "json-columns": densewire.TableJSONColumns,
	"csv": densewire.TableCSV, "msgpack": densewire.TableMsgpack, "protobuf": densewire.TableProtobuf, "arrow": densewire.TableArrow,
}

func checkTable(t *testing.T, c *goldenCase) {
	want := expectedTable(t, c)
	f, ok := tableFormatOfCase[c.Format]
	if !ok {
		t.Fatalf("unsupported table format %q", c.Format)
	}
	// the headers of section 15.2: parsed to the case's schema, and written exactly as given
	h := http.Header{}
	for k, v := range c.Headers {
		h.Set(k, v)
	}
	schema, err := densewire.ParseTableHeaders(h)
	if err != nil {
		t.Fatal(err)
	}
	if schema.Name != want.Name || schema.Rows != want.Rows {
		t.Fatalf("headers give %q of %d rows", schema.Name, schema.Rows)
	}
	for i, s := range want.Schema() {
		if i >= len(schema.Columns) || schema.Columns[i] != s {
			t.Fatalf("Densewire-Columns gives %+v, want %+v", schema.Columns, want.Schema())
		}
	}
	if got := densewire.FormatColumnsHeader(want.Schema()); got != c.Headers["Densewire-Columns"] {
		t.Fatalf("FormatColumnsHeader = %q, want %q", got, c.Headers["Densewire-Columns"])
	}
	body := goldenBody(t, c)
	var got *densewire.Table
	switch f {
	case densewire.TableJSON:
		got, err = densewire.DecodeTableJSON(body, schema.Name, schema.Columns)
	case densewire.TableCSV:
		got, err = densewire.DecodeTableCSV(body, schema.Name, schema.Columns)
	case densewire.TableJSONRows:
		got, err = densewire.DecodeTableJSONRows(body)
	case densewire.TableJSONColumns:
		got, err = densewire.DecodeTableJSONColumns(body)
	case densewire.TableMsgpack:
		got, err = densewire.DecodeTableMsgpack(body)
	case densewire.TableProtobuf:
		got, err = densewire.DecodeTableProtobuf(body)
	case densewire.TableArrow:
		got, err = arrowipc.DecodeTable(body)
	}
	if err != nil {
		t.Fatal(err)
	}
	sameTable(t, "decode", got, want)
	// the generic entry point, as the client uses it, agrees
	h.Set("Content-Type", f.MediaType())
	viaResponse, err := densewire.DecodeTableResponse(h, body)
	if err != nil {
		t.Fatalf("DecodeTableResponse: %v", err)
	}
	sameTable(t, "DecodeTableResponse", viaResponse, want)

	switch f {
	case densewire.TableMsgpack:
		if !c.ByteExact {
			t.Fatal("MessagePack table cases are byte-exact")
		}
		enc, err := densewire.EncodeTableMsgpack(want)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(enc, body) {
			t.Fatalf("encode:\n got %x\nwant %x", enc, body)
		}
	case densewire.TableProtobuf:
		if !c.ByteExact {
			t.Fatal("Protobuf table cases are byte-exact")
		}
		enc, err := densewire.EncodeTableProtobuf(want, columnEncoding(t, c.ColumnEncoding))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(enc, body) {
			t.Fatalf("encode:\n got %x\nwant %x", enc, body)
		}
		// the official parser reads the same message
		var msg densewirepb.Table
		if err := proto.Unmarshal(body, &msg); err != nil {
			t.Fatalf("proto.Unmarshal: %v", err)
		}
		official, err := proto.MarshalOptions{Deterministic: true}.Marshal(&msg)
		if err != nil || !bytes.Equal(official, body) {
			t.Fatalf("proto.Marshal of the parsed message gives %x (%v)", official, err)
		}
		if msg.Name != want.Name || msg.Rows != uint64(want.Rows) || len(msg.Columns) != len(want.Columns) {
			t.Fatalf("proto.Unmarshal reads %v", &msg)
		}
	default:
		// text formats and Arrow are not byte-exact: our encoding must decode to the same table
		enc, err := densewire.EncodeTable(f, want)
		if err != nil {
			t.Fatal(err)
		}
		h.Set("Content-Type", f.MediaType())
		back, err := densewire.DecodeTableResponse(h, enc)
		if err != nil {
			t.Fatalf("decoding our own encoding: %v\n%s", err, enc)
		}
		sameTable(t, "round trip", back, want)
	}
}

// invalidTableCaseError runs what an invalid table case describes and returns its error.
func checkInvalidTable(t *testing.T, c *goldenCase) {
	var err error
	switch c.Direction {
	case "encode":
		if c.Format != "json" {
			t.Fatalf("no table encoder check for %s", c.Format)
		}
		want := expectedTable(t, c)
		var out []byte
		out, err = densewire.EncodeTableJSON(want, densewire.TableJSON)
		if err == nil {
			t.Fatalf("encoded %s", out)
		}
		// every JSON layout refuses it alike
		for _, layout := range []densewire.TableFormat{densewire.TableJSONRows, densewire.TableJSONColumns} {
			_, e2 := densewire.EncodeTableJSON(want, layout)
			checkCaseError(t, c, e2)
		}
	case "decode":
		body := goldenBody(t, c)
		var columns []densewire.ColumnSpec
		for _, gc := range c.Columns {
			typ, d, perr := densewire.ParseColumnType(gc.Type)
			if perr != nil {
				t.Fatal(perr)
			}
			columns = append(columns, densewire.ColumnSpec{Name: gc.Name, Type: typ, Dimensions: d})
		}
		switch c.Format {
		case "json":
			_, err = densewire.DecodeTableJSON(body, "t", columns)
		case "csv":
			_, err = densewire.DecodeTableCSV(body, "t", columns)
		case "json-rows":
			_, err = densewire.DecodeTableJSONRows(body)
		case "json-columns":
			_, err = densewire.DecodeTableJSONColumns(body)
		case "msgpack":
			_, err = densewire.DecodeTableMsgpack(body)
		case "protobuf":
			_, err = densewire.DecodeTableProtobuf(body)
		case "arrow":
			_, err = arrowipc.DecodeTable(body)
		default:
			t.Fatalf("unsupported table format %q", c.Format)
		}
	default:
		t.Fatalf("unknown direction %q", c.Direction)
	}
	checkCaseError(t, c, err)
}
