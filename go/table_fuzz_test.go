package densewire_test

import (
	"testing"

	"google.golang.org/protobuf/proto"

	densewire "github.com/densewire/densewire/go"
	"github.com/densewire/densewire/go/densewirepb"
)

// Fuzz targets for the table decoders, seeded with the bodies of tables.json (run as plain tests
// by `go test`; ci.sh fuzzes each for a few seconds).

func addTableBodies(f *testing.F, formats ...string) {
	for _, c := range loadGolden(f) {
		if c.file != "tables" || c.Direction == "encode" {
			continue
		}
		for i, format := range formats {
			if c.Format == format {
				f.Add(goldenBody(f, &c), uint8(i))
			}
		}
	}
}

// checkTableRoundTrip: a table a decoder accepted is valid, and re-encoded decodes the same.
func checkTableRoundTrip(t *testing.T, got *densewire.Table, f densewire.TableFormat) {
	t.Helper()
	if err := got.Validate(); err != nil {
		t.Fatalf("accepted an invalid table: %v", err)
	}
	body, err := densewire.EncodeTable(f, got)
	if err != nil {
		t.Fatalf("re-encoding: %v", err)
	}
	var again *densewire.Table
	switch f {
	case densewire.TableJSON:
		again, err = densewire.DecodeTableJSON(body, got.Name, got.Schema())
	case densewire.TableCSV:
		again, err = densewire.DecodeTableCSV(body, got.Name, got.Schema())
	default:
		again, err = densewire.DecodeTable(f, nil, body)
	}
	if err != nil {
		t.Fatalf("the re-encoded body fails: %v\n%q", err, body)
	}
	sameTable(t, "re-encoded", again, got)
}

// FuzzDecodeTableProtobuf also compares with proto.Unmarshal: a body the official parser rejects
// must be rejected as malformed or truncated.
func FuzzDecodeTableProtobuf(f *testing.F) {
	addTableBodies(f, "protobuf")
	f.Fuzz(func(t *testing.T, body []byte, _ uint8) {
		var msg densewirepb.Table
		officialErr := proto.Unmarshal(body, &msg)
		got, err := densewire.DecodeTableProtobuf(body)
		if err != nil {
			e := checkDecodeError(t, err, len(body))
			if officialErr != nil && e.Category != densewire.Malformed && e.Category != densewire.Truncated {
				t.Fatalf("proto.Unmarshal fails (%v) but the error is %v", officialErr, err)
			}
			return
		}
		if officialErr != nil {
			t.Fatalf("accepted a body proto.Unmarshal rejects: %v", officialErr)
		}
		if msg.Name != got.Name || msg.Rows != uint64(got.Rows) || len(msg.Columns) != len(got.Columns) {
			t.Fatalf("proto.Unmarshal reads %v, we read %+v", &msg, got)
		}
		checkTableRoundTrip(t, got, densewire.TableProtobuf)
	})
}

func FuzzDecodeTableMsgpack(f *testing.F) {
	addTableBodies(f, "msgpack")
	f.Fuzz(func(t *testing.T, body []byte, _ uint8) {
		got, err := densewire.DecodeTableMsgpack(body)
		if err != nil {
			checkDecodeError(t, err, len(body))
			return
		}
		checkTableRoundTrip(t, got, densewire.TableMsgpack)
	})
}

// the schema the typeless formats (JSON objects, CSV) are decoded with in the fuzzers
var fuzzSchema = []densewire.ColumnSpec{{Name: "flag", Type: densewire.ColumnBool}, {Name: "i64", Type: densewire.ColumnInt64},
	{Name: "f32", Type: densewire.ColumnFloat32}, {Name: "text", Type: densewire.ColumnString}, {Name: "id", Type: densewire.ColumnUUID},
	{Name: "embedding", Type: densewire.ColumnFloat32Vector, Dimensions: 3}}

// FuzzDecodeTableJSON runs the three layouts (selected by the second argument); text that is not
// JSON must be Malformed.
func FuzzDecodeTableJSON(f *testing.F) {
	addTableBodies(f, "json", "json-rows", "json-columns")
	f.Add([]byte(`[{"flag":true,"i64":-9223372036854775808,"f32":0.1,"text":"\u00e9\n","id":"7C9E6679-7425-40DE-944B-E07FC1F90AE7","embedding":[1,2e3,-0.0]}]`), uint8(0))
	f.Fuzz(func(t *testing.T, body []byte, layout uint8) {
		var (
			got *densewire.Table
			err error
			f   densewire.TableFormat
		)
		switch layout % 3 {
		case 0:
			f = densewire.TableJSON
			got, err = densewire.DecodeTableJSON(body, "t", fuzzSchema)
		case 1:
			f = densewire.TableJSONRows
			got, err = densewire.DecodeTableJSONRows(body)
		case 2:
			f = densewire.TableJSONColumns
			got, err = densewire.DecodeTableJSONColumns(body)
		}
		if checkJSONDecode(t, body, err) {
			checkTableRoundTrip(t, got, f)
		}
	})
}

func FuzzDecodeTableCSV(f *testing.F) {
	addTableBodies(f, "csv")
	f.Add([]byte("flag,i64,f32,text,id,embedding\r\ntrue,-1,NaN,\"a,\"\"b\"\"\",7c9e6679-7425-40de-944b-e07fc1f90ae7,\"[1,2,3]\"\r\n"), uint8(1))
	f.Fuzz(func(t *testing.T, body []byte, schema uint8) {
		cols := fuzzSchema
		if schema%2 == 0 { // the golden tables' own schemas are in the headers: try a short one too
			cols = fuzzSchema[:2]
		}
		got, err := densewire.DecodeTableCSV(body, "t", cols)
		if err != nil {
			checkDecodeError(t, err, len(body))
			return
		}
		checkTableRoundTrip(t, got, densewire.TableCSV)
	})
}
