package bench

// Table decoding (SPEC.md section 15) on a table of the demo's size and schema: 67,627 rows of
// uuid uuid, status int32, longitude float64, latitude float64 (2,434,572 bytes of values),
// random UUIDs, statuses 0-3 and coordinates clustered around a city, as the demo's points are.
// Every decoder ends with the four columns in hand as typed Go slices ([][16]byte, []int32,
// []float64, []float64: views where the bytes are aligned, copies where not); the baseline is
// what a Go service does without densewire: encoding/json of the JSON objects body into a
// []struct.
//
//	go test -run '^$' -bench 'Table' -benchtime 1s -count 6

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"net/http"
	"testing"

	"google.golang.org/protobuf/proto"

	densewire "github.com/densewire/densewire/go"
	"github.com/densewire/densewire/go/arrowipc"
	"github.com/densewire/densewire/go/densewirepb"
)

const tableRows = 67627

var (
	pointsTable      = makePoints()
	pointsValueBytes = int64(tableRows * (16 + 4 + 8 + 8))
	tableBodies      = encodeTableBodies()
)

func makePoints() *densewire.Table {
	r := rand.New(rand.NewPCG(67627, 4))
	ids := make([]byte, 16*tableRows)
	status := make([]byte, 4*tableRows)
	lon := make([]byte, 8*tableRows)
	lat := make([]byte, 8*tableRows)
	for i := 0; i < tableRows; i++ {
		for k := 0; k < 16; k++ {
			ids[16*i+k] = byte(r.Uint32())
		}
		ids[16*i+6] = ids[16*i+6]&0x0f | 0x40 // version 4
		ids[16*i+8] = ids[16*i+8]&0x3f | 0x80 // variant
		binary.LittleEndian.PutUint32(status[4*i:], uint32(r.IntN(4)))
		binary.LittleEndian.PutUint64(lon[8*i:], math.Float64bits(-73.98+r.NormFloat64()*0.05))
		binary.LittleEndian.PutUint64(lat[8*i:], math.Float64bits(40.75+r.NormFloat64()*0.05))
	}
	return &densewire.Table{Name: "points", Rows: tableRows, Columns: []densewire.Column{
		{ColumnSpec: densewire.ColumnSpec{Name: "uuid", Type: densewire.ColumnUUID}, Data: ids},
		{ColumnSpec: densewire.ColumnSpec{Name: "status", Type: densewire.ColumnInt32}, Data: status},
		{ColumnSpec: densewire.ColumnSpec{Name: "longitude", Type: densewire.ColumnFloat64}, Data: lon},
		{ColumnSpec: densewire.ColumnSpec{Name: "latitude", Type: densewire.ColumnFloat64}, Data: lat},
	}}
}

type tableBodySet struct {
	pbPlain, pbSplit, msgpack, arrow, csv, objects, rowsJSON, columnsJSON []byte
}

func encodeTableBodies() tableBodySet {
	var s tableBodySet
	var err error
	must := func(b []byte, e error) []byte {
		if e != nil {
			err = e
		}
		return b
	}
	s.pbPlain = must(densewire.EncodeTableProtobuf(pointsTable, densewire.EncodingPlain))
	s.pbSplit = must(densewire.EncodeTableProtobuf(pointsTable, densewire.EncodingByteStreamSplit))
	s.msgpack = must(densewire.EncodeTableMsgpack(pointsTable))
	s.arrow = must(arrowipc.EncodeTable(pointsTable))
	s.csv = must(densewire.EncodeTableCSV(pointsTable))
	s.objects = must(densewire.EncodeTableJSON(pointsTable, densewire.TableJSON))
	s.rowsJSON = must(densewire.EncodeTableJSON(pointsTable, densewire.TableJSONRows))
	s.columnsJSON = must(densewire.EncodeTableJSON(pointsTable, densewire.TableJSONColumns))
	if err != nil {
		panic(err)
	}
	return s
}

var sink int

// typed takes every column as its Go slice, as a caller would.
func typed(t *densewire.Table, err error) {
	check := func(err error) {
		if err != nil {
			panic(err)
		}
	}
	check(err)
	ids, err := t.Columns[0].UUIDs()
	check(err)
	status, err := t.Columns[1].Int32()
	check(err)
	lon, err := t.Columns[2].Float64()
	check(err)
	lat, err := t.Columns[3].Float64()
	check(err)
	sink += len(ids) + len(status) + len(lon) + len(lat)
}

func reportTable(b *testing.B, body []byte) {
	b.SetBytes(pointsValueBytes)
	b.ReportMetric(float64(len(body)), "body-B")
}

// ---- the baseline: encoding/json of the objects layout into Go structs

type pointRow struct {
	UUID      string  `json:"uuid"`
	Status    int32   `json:"status"`
	Longitude float64 `json:"longitude"`
	Latitude  float64 `json:"latitude"`
}

func BenchmarkTable_Decode_JSONBaseline(b *testing.B) {
	for b.Loop() {
		var rows []pointRow
		mustOK(b, json.Unmarshal(tableBodies.objects, &rows))
	}
	reportTable(b, tableBodies.objects)
}

// ---- densewire's decoders

var pointsSchema = pointsTable.Schema()

func BenchmarkTable_Decode_JSONObjects(b *testing.B) {
	for b.Loop() {
		typed(densewire.DecodeTableJSON(tableBodies.objects, "points", pointsSchema))
	}
	reportTable(b, tableBodies.objects)
}

func BenchmarkTable_Decode_JSONRows(b *testing.B) {
	for b.Loop() {
		typed(densewire.DecodeTableJSONRows(tableBodies.rowsJSON))
	}
	reportTable(b, tableBodies.rowsJSON)
}

func BenchmarkTable_Decode_JSONColumns(b *testing.B) {
	for b.Loop() {
		typed(densewire.DecodeTableJSONColumns(tableBodies.columnsJSON))
	}
	reportTable(b, tableBodies.columnsJSON)
}

func BenchmarkTable_Decode_CSV(b *testing.B) {
	for b.Loop() {
		typed(densewire.DecodeTableCSV(tableBodies.csv, "points", pointsSchema))
	}
	reportTable(b, tableBodies.csv)
}

func BenchmarkTable_Decode_Msgpack(b *testing.B) {
	for b.Loop() {
		typed(densewire.DecodeTableMsgpack(tableBodies.msgpack))
	}
	reportTable(b, tableBodies.msgpack)
}

func BenchmarkTable_Decode_ProtobufPlain(b *testing.B) {
	for b.Loop() {
		typed(densewire.DecodeTableProtobuf(tableBodies.pbPlain))
	}
	reportTable(b, tableBodies.pbPlain)
}

func BenchmarkTable_Decode_ProtobufSplit(b *testing.B) {
	for b.Loop() {
		typed(densewire.DecodeTableProtobuf(tableBodies.pbSplit))
	}
	reportTable(b, tableBodies.pbSplit)
}

// The generated types of densewirepb on the same plain body: proto.Unmarshal copies every data
// field, and gives bytes still to be interpreted, so this is a lower bound for that route.
func BenchmarkTable_Decode_ProtobufGenerated(b *testing.B) {
	for b.Loop() {
		var msg densewirepb.Table
		mustOK(b, proto.Unmarshal(tableBodies.pbPlain, &msg))
	}
	reportTable(b, tableBodies.pbPlain)
}

func BenchmarkTable_Decode_Arrow(b *testing.B) {
	for b.Loop() {
		typed(arrowipc.DecodeTable(tableBodies.arrow))
	}
	reportTable(b, tableBodies.arrow)
}

// TestSameTable checks that every benchmarked body decodes to the benchmarked table.
func TestSameTable(t *testing.T) {
	h := http.Header{}
	densewire.SetTableHeaders(h, pointsTable)
	for name, c := range map[string]struct {
		f    densewire.TableFormat
		body []byte
	}{
		"plain": {densewire.TableProtobuf, tableBodies.pbPlain}, "split": {densewire.TableProtobuf, tableBodies.pbSplit},
		"msgpack": {densewire.TableMsgpack, tableBodies.msgpack}, "arrow": {densewire.TableArrow, tableBodies.arrow},
		"csv": {densewire.TableCSV, tableBodies.csv}, "objects": {densewire.TableJSON, tableBodies.objects},
		"rows": {densewire.TableJSONRows, tableBodies.rowsJSON}, "columns": {densewire.TableJSONColumns, tableBodies.columnsJSON},
	} {
		h.Set("Content-Type", c.f.MediaType())
		got, err := densewire.DecodeTableResponse(h, c.body)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for i := range pointsTable.Columns {
			if string(got.Columns[i].Data) != string(pointsTable.Columns[i].Data) {
				t.Fatalf("%s: column %d differs", name, i)
			}
		}
	}
	var rows []pointRow
	if err := json.Unmarshal(tableBodies.objects, &rows); err != nil || len(rows) != tableRows || rows[5].Longitude != math.Float64frombits(binary.LittleEndian.Uint64(pointsTable.Columns[2].Data[40:])) {
		t.Fatal("baseline")
	}
	var msg densewirepb.Table
	if err := proto.Unmarshal(tableBodies.pbPlain, &msg); err != nil || string(msg.Columns[3].Data) != string(pointsTable.Columns[3].Data) {
		t.Fatal("generated")
	}
}
