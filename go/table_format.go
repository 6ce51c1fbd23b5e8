package densewire

import (
	"net/http"
	"strconv"
	"sync"
)

// TableFormat is one of the seven table body formats of SPEC.md section 15.9.
type TableFormat uint8

// The table formats, in the server's order of preference at equal quality.
const (
	TableJSON        TableFormat = 1 // application/json: an array of objects, one a row (section 15.3)
	TableJSONRows    TableFormat = 2 // application/vnd.densewire.rows+json
	TableJSONColumns TableFormat = 3 // application/vnd.densewire.columns+json
	TableCSV         TableFormat = 4 // text/csv (section 15.4)
	TableMsgpack     TableFormat = 5 // application/vnd.msgpack, columnar (section 15.5)
	TableProtobuf    TableFormat = 6 // application/protobuf, densewire.v1.Table (section 15.6)
	TableArrow       TableFormat = 7 // application/vnd.apache.arrow.stream (section 15.7; import densewire/go/arrowipc)
)

// Media types of the table formats that the tensor formats do not have.
const (
	MediaJSONRows    = "application/vnd.densewire.rows+json"
	MediaJSONColumns = "application/vnd.densewire.columns+json"
	MediaCSV         = "text/csv"
)

var tableFormatNames = [...]string{"", "json", "json-rows", "json-columns", "csv", "msgpack", "protobuf", "arrow"}

var tableMediaTypes = [...][]string{
	nil,
	{MediaJSON},
	{MediaJSONRows},
	{MediaJSONColumns},
	{MediaCSV},
	{MediaMsgpack, "application/msgpack", "application/x-msgpack"},
	{MediaProtobuf, "application/x-protobuf"},
	{MediaArrow},
}

// AllTableFormats is every table format in the server's order.
var AllTableFormats = []TableFormat{TableJSON, TableJSONRows, TableJSONColumns, TableCSV, TableMsgpack, TableProtobuf, TableArrow}

func (f TableFormat) valid() bool { return f >= TableJSON && f <= TableArrow }

// String returns the name of the format query parameter: json, json-rows, json-columns, csv,
// msgpack, protobuf, arrow.
func (f TableFormat) String() string {
	if f.valid() {
		return tableFormatNames[f]
	}
	return "TableFormat(" + strconv.Itoa(int(f)) + ")"
}

// MediaType returns the canonical media type of the format.
func (f TableFormat) MediaType() string {
	if f.valid() {
		return tableMediaTypes[f][0]
	}
	return ""
}

// ParseTableFormat parses a format query parameter value.
func ParseTableFormat(name string) (TableFormat, error) {
	for f := TableJSON; f <= TableArrow; f++ {
		if tableFormatNames[f] == name {
			return f, nil
		}
	}
	return 0, newError(InvalidField, "format", -1, "unknown table format "+strconv.Quote(name)+
		" (want json, json-rows, json-columns, csv, msgpack, protobuf or arrow)")
}

// TableFormatOf returns the table format of a Content-Type value (parameters ignored, aliases
// accepted).
func TableFormatOf(contentType string) (TableFormat, bool) {
	mt := mediaTypeOnly(contentType)
	for f := TableJSON; f <= TableArrow; f++ {
		for _, m := range tableMediaTypes[f] {
			if mt == m {
				return f, true
			}
		}
	}
	return 0, false
}

// The Arrow table codec lives in package arrowipc, which registers it here when imported.
var (
	arrowTableMu  sync.RWMutex
	arrowTableDec func([]byte) (*Table, error)
	arrowTableEnc func(*Table) ([]byte, error)
)

// RegisterArrowTable installs the Arrow IPC table codec used by DecodeTable, EncodeTable and the
// Client. Package arrowipc calls it from its init function.
func RegisterArrowTable(encode func(*Table) ([]byte, error), decode func([]byte) (*Table, error)) {
	arrowTableMu.Lock()
	defer arrowTableMu.Unlock()
	arrowTableEnc, arrowTableDec = encode, decode
}

func arrowTableCodec() (func(*Table) ([]byte, error), func([]byte) (*Table, error)) {
	arrowTableMu.RLock()
	defer arrowTableMu.RUnlock()
	return arrowTableEnc, arrowTableDec
}

// DecodeTable decodes a table body of format f. The JSON objects layout and CSV carry no types:
// they take the columns (and the name) from schema, which the other formats ignore (pass nil).
// Use ParseTableHeaders to build the schema from a response's headers.
func DecodeTable(f TableFormat, schema *TableSchema, body []byte) (*Table, error) {
	var (
		t   *Table
		err *Error
	)
	switch f {
	case TableJSON, TableCSV:
		if schema == nil {
			return nil, newError(InvalidField, HeaderColumns, -1, f.String()+" tables carry no types: a schema ("+HeaderColumns+") is needed")
		}
		if f == TableJSON {
			t, err = decodeTableJSONObjects(body, schema.Name, schema.Columns)
		} else {
			t, err = decodeTableCSV(body, schema.Name, schema.Columns)
		}
		if err == nil && schema.Rows >= 0 && t.Rows != schema.Rows {
			err = newError(ShapeMismatch, HeaderRows, -1, "the body has "+strconv.Itoa(t.Rows)+" rows, "+HeaderRows+" says "+strconv.Itoa(schema.Rows))
		}
	case TableJSONRows:
		t, err = decodeTableJSONRows(body)
	case TableJSONColumns:
		t, err = decodeTableJSONColumns(body)
	case TableMsgpack:
		t, err = decodeTableMsgpack(body)
	case TableProtobuf:
		t, err = decodeTableProtobuf(body)
	case TableArrow:
		_, dec := arrowTableCodec()
		if dec == nil {
			return nil, arrowMissing()
		}
		return dec(body)
	default:
		return nil, newError(UnsupportedMediaType, "", -1, "unknown table format "+f.String())
	}
	if err != nil {
		return nil, err
	}
	return t, nil
}

// DecodeTableResponse decodes the body of a GET /v1/tables/{name} answer: the format from
// Content-Type, the schema from the headers of SPEC.md section 15.2. For the typed formats the
// headers, when present, must agree with the body (InvalidField on the header otherwise).
func DecodeTableResponse(h http.Header, body []byte) (*Table, error) {
	ct, _ := headerValue(h, "Content-Type")
	f, ok := TableFormatOf(ct)
	if !ok {
		return nil, newError(UnsupportedMediaType, "Content-Type", -1, "not a table media type: "+strconv.Quote(ct))
	}
	var schema *TableSchema
	if _, has := headerValue(h, HeaderColumns); has || f == TableJSON || f == TableCSV {
		s, err := ParseTableHeaders(h)
		if err != nil {
			return nil, err
		}
		schema = s
	}
	t, err := DecodeTable(f, schema, body)
	if err != nil {
		return nil, err
	}
	if schema != nil && f != TableJSON && f != TableCSV {
		if e := checkAgainstHeaders(t, schema); e != nil {
			return nil, e
		}
	}
	return t, nil
}

func checkAgainstHeaders(t *Table, s *TableSchema) *Error {
	if s.Rows >= 0 && s.Rows != t.Rows {
		return newError(InvalidField, HeaderRows, -1, HeaderRows+" says "+strconv.Itoa(s.Rows)+" rows, the body has "+strconv.Itoa(t.Rows))
	}
	if len(s.Columns) != len(t.Columns) {
		return newError(InvalidField, HeaderColumns, -1, HeaderColumns+" names "+strconv.Itoa(len(s.Columns))+" columns, the body has "+strconv.Itoa(len(t.Columns)))
	}
	for i, c := range s.Columns {
		if c != t.Columns[i].ColumnSpec {
			return newError(InvalidField, HeaderColumns, -1, HeaderColumns+" column "+strconv.Itoa(i)+" is "+c.Name+"="+c.TypeName()+
				", the body has "+t.Columns[i].Name+"="+t.Columns[i].TypeName())
		}
	}
	return nil
}

// EncodeTable writes the table in format f. Protobuf columns of width >= 2 are written
// byte-stream-split, as densewire's server does; use EncodeTableProtobuf to choose.
func EncodeTable(f TableFormat, t *Table) ([]byte, error) {
	switch f {
	case TableJSON, TableJSONRows, TableJSONColumns:
		return EncodeTableJSON(t, f)
	case TableCSV:
		return EncodeTableCSV(t)
	case TableMsgpack:
		return EncodeTableMsgpack(t)
	case TableProtobuf:
		return EncodeTableProtobuf(t, EncodingByteStreamSplit)
	case TableArrow:
		enc, _ := arrowTableCodec()
		if enc == nil {
			return nil, arrowMissing()
		}
		return enc(t)
	}
	return nil, newError(UnsupportedMediaType, "", -1, "unknown table format "+f.String())
}
