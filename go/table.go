package densewire

import (
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// Tables (SPEC.md section 15): n rows of named, typed columns, held column by column.

// ColumnType is the type of a table column (SPEC.md section 15.1). Its values are the Protobuf
// ColumnType enum of table.proto; the zero value is not a valid type. A Float32Vector column also
// has Dimensions (ColumnSpec).
type ColumnType uint8

// The column types of SPEC.md section 15.1.
const (
	ColumnBool          ColumnType = 1 // one byte a value, 0 or 1
	ColumnInt32         ColumnType = 2 // little-endian two's complement
	ColumnInt64         ColumnType = 3 // little-endian two's complement
	ColumnFloat32       ColumnType = 4 // IEEE 754 binary32
	ColumnFloat64       ColumnType = 5 // IEEE 754 binary64
	ColumnString        ColumnType = 6 // UTF-8 text
	ColumnUUID          ColumnType = 7 // 16 bytes, RFC 9562 order (that of the canonical text)
	ColumnFloat32Vector ColumnType = 8 // float32[d]: d float32 items a value
)

var columnTypeNames = [...]string{"", "bool", "int32", "int64", "float32", "float64", "string", "uuid", "float32[]"}

// Valid reports whether t is one of the eight column types.
func (t ColumnType) Valid() bool { return t >= ColumnBool && t <= ColumnFloat32Vector }

// String returns the type name ("int32"; "float32[]" for vectors: ColumnSpec.TypeName adds d).
func (t ColumnType) String() string {
	if t.Valid() {
		return columnTypeNames[t]
	}
	return "ColumnType(" + strconv.Itoa(int(t)) + ")"
}

// ColumnSpec is a column's name and type: one entry of the Densewire-Columns header.
type ColumnSpec struct {
	Name       string
	Type       ColumnType
	Dimensions int // d of a Float32Vector column; 0 for the other types
}

// TypeName is the wire name of the column's type: "int32", "float32[384]".
func (s ColumnSpec) TypeName() string {
	if s.Type == ColumnFloat32Vector {
		return "float32[" + strconv.Itoa(s.Dimensions) + "]"
	}
	return s.Type.String()
}

// Width is the byte width of one value (4d for vectors), 0 for strings.
func (s ColumnSpec) Width() int {
	switch s.Type {
	case ColumnBool:
		return 1
	case ColumnInt32, ColumnFloat32:
		return 4
	case ColumnInt64, ColumnFloat64:
		return 8
	case ColumnUUID:
		return 16
	case ColumnFloat32Vector:
		return 4 * s.Dimensions
	}
	return 0
}

// itemWidth is the width of one item for byte-stream-split: 4 for vectors (float32 items).
func (s ColumnSpec) itemWidth() int {
	if s.Type == ColumnFloat32Vector {
		return 4
	}
	return s.Width()
}

// maxVectorDims bounds d so that 4d and n*4d stay far from overflow on any platform.
const maxVectorDims = 1 << 24

// ParseColumnType parses a type name of SPEC.md section 15.1 (exact lowercase ASCII; d in decimal
// without leading zeros, d >= 1). Anything else is an UnknownDType error (Field empty: the caller
// knows where the name came from).
func ParseColumnType(name string) (ColumnType, int, error) {
	for t := ColumnBool; t < ColumnFloat32Vector; t++ {
		if columnTypeNames[t] == name {
			return t, 0, nil
		}
	}
	if rest, ok := strings.CutPrefix(name, "float32["); ok && strings.HasSuffix(rest, "]") {
		digits := rest[:len(rest)-1]
		if d, ok := parseDecimal(digits); ok && d >= 1 && d <= maxVectorDims && digits[0] != '0' {
			return ColumnFloat32Vector, int(d), nil
		}
	}
	return 0, 0, &Error{Category: UnknownDType, Offset: -1, Message: "unknown column type " + strconv.Quote(name) +
		" (want bool, int32, int64, float32, float64, string, uuid or float32[d])"}
}

// Header names of SPEC.md section 15.2.
const (
	HeaderTable   = "Densewire-Table"
	HeaderRows    = "Densewire-Rows"
	HeaderColumns = "Densewire-Columns"
)

// FormatColumnsHeader writes the Densewire-Columns value of the columns: name=type joined by ",",
// names percent-encoded (RFC 3986 unreserved bytes kept, the rest %XX in uppercase hex).
func FormatColumnsHeader(columns []ColumnSpec) string {
	var b strings.Builder
	const hex = "0123456789ABCDEF"
	for i, c := range columns {
		if i > 0 {
			b.WriteByte(',')
		}
		for j := 0; j < len(c.Name); j++ {
			ch := c.Name[j]
			if ch >= 'A' && ch <= 'Z' || ch >= 'a' && ch <= 'z' || ch >= '0' && ch <= '9' || ch == '-' || ch == '.' || ch == '_' || ch == '~' {
				b.WriteByte(ch)
			} else {
				b.WriteByte('%')
				b.WriteByte(hex[ch>>4])
				b.WriteByte(hex[ch&15])
			}
		}
		b.WriteByte('=')
		b.WriteString(c.TypeName())
	}
	return b.String()
}

// ParseColumnsHeader parses a Densewire-Columns value (SPEC.md section 15.2). An entry without
// "=", a bad percent escape, a name that is empty, not UTF-8 or repeated is InvalidField on
// "Densewire-Columns"; an unknown type is UnknownDType on it. An empty value is no columns.
func ParseColumnsHeader(value string) ([]ColumnSpec, error) {
	if value == "" {
		return []ColumnSpec{}, nil
	}
	bad := func(msg string) error {
		return newError(InvalidField, HeaderColumns, -1, HeaderColumns+": "+msg)
	}
	entries := strings.Split(value, ",")
	out := make([]ColumnSpec, 0, len(entries))
	seen := make(map[string]bool, len(entries))
	for i, entry := range entries {
		rawName, typ, ok := strings.Cut(entry, "=")
		if !ok {
			return nil, bad("entry " + strconv.Itoa(i) + " " + strconv.Quote(entry) + " has no '='")
		}
		name, ok := percentDecode(rawName)
		if !ok {
			return nil, bad("entry " + strconv.Itoa(i) + " " + strconv.Quote(rawName) + " has a bad percent escape")
		}
		if name == "" || !utf8.ValidString(name) {
			return nil, bad("entry " + strconv.Itoa(i) + " has an empty or non-UTF-8 name")
		}
		if seen[name] {
			return nil, bad("column " + strconv.Quote(name) + " appears twice")
		}
		seen[name] = true
		t, d, err := ParseColumnType(typ)
		if err != nil {
			e := err.(*Error)
			e.Field = HeaderColumns
			e.Message = HeaderColumns + ": column " + strconv.Quote(name) + ": " + e.Message
			return nil, e
		}
		out = append(out, ColumnSpec{Name: name, Type: t, Dimensions: d})
	}
	return out, nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

func percentDecode(s string) (string, bool) {
	if strings.IndexByte(s, '%') < 0 {
		return s, true
	}
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			out = append(out, s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		hi, ok1 := unhex(s[i+1])
		lo, ok2 := unhex(s[i+2])
		if !ok1 || !ok2 {
			return "", false
		}
		out = append(out, hi<<4|lo)
		i += 2
	}
	return string(out), true
}

// TableSchema is what the headers of a table response (SPEC.md section 15.2) say about it. The
// JSON objects and CSV decoders need its Columns; the binary formats carry their own.
type TableSchema struct {
	Name    string
	Rows    int // -1 when not known
	Columns []ColumnSpec
}

// ParseTableHeaders reads Densewire-Table, Densewire-Rows and Densewire-Columns. A missing or
// malformed Densewire-Columns is InvalidField on it (UnknownDType for an unknown type); a
// malformed Densewire-Rows is InvalidField on it, a missing one leaves Rows at -1.
func ParseTableHeaders(h http.Header) (*TableSchema, error) {
	s := &TableSchema{Rows: -1}
	s.Name, _ = headerValue(h, HeaderTable)
	if v, ok := headerValue(h, HeaderRows); ok {
		n, ok := parseDecimal(v)
		if !ok || n > uint64(maxInt) {
			return nil, newError(InvalidField, HeaderRows, -1, HeaderRows+" "+strconv.Quote(v)+" is not a row count")
		}
		s.Rows = int(n)
	}
	v, ok := headerValue(h, HeaderColumns)
	if !ok {
		return nil, newError(InvalidField, HeaderColumns, -1, "missing header "+HeaderColumns)
	}
	cols, err := ParseColumnsHeader(v)
	if err != nil {
		return nil, err
	}
	s.Columns = cols
	return s, nil
}

const maxInt = int(^uint(0) >> 1)

// SetTableHeaders writes the headers of SPEC.md section 15.2 for the table.
func SetTableHeaders(h http.Header, t *Table) {
	h.Set("Densewire-Version", "1")
	h.Set(HeaderTable, t.Name)
	h.Set(HeaderRows, strconv.Itoa(t.Rows))
	h.Set(HeaderColumns, FormatColumnsHeader(t.Schema()))
}

// Table is a decoded table (SPEC.md section 15.8): its name, row count and columns in order.
type Table struct {
	Name    string
	Rows    int
	Columns []Column
}

// Column is one column of a Table. Fixed-width columns hold their values in Data, Rows*Width()
// little-endian bytes (bool: 0 or 1 a byte; uuid: 16 bytes a value; float32[d]: Rows*d float32
// items, row-major); string columns hold Strings. Data may alias the decoded body (MessagePack and
// plain Protobuf), as Tensor.Data does. The typed accessors (Int32, Float64, ...) return the
// values, sharing Data's memory when the host is little-endian and Data is aligned, else copying.
type Column struct {
	ColumnSpec
	Data    []byte
	Strings []string
}

// Schema returns the column specs of the table.
func (t *Table) Schema() []ColumnSpec {
	out := make([]ColumnSpec, len(t.Columns))
	for i := range t.Columns {
		out[i] = t.Columns[i].ColumnSpec
	}
	return out
}

// Column returns the column of that name, or nil. The accessors of a nil *Column return an
// InvalidField error naming no column, so tbl.Column("x").Float64() needs one error check.
func (t *Table) Column(name string) *Column {
	for i := range t.Columns {
		if t.Columns[i].Name == name {
			return &t.Columns[i]
		}
	}
	return nil
}

// Validate checks that every column is of a valid type and holds exactly Rows values (bools 0 or
// 1, strings valid UTF-8), and that names are non-empty and unique. Encoders call it.
func (t *Table) Validate() error {
	if t.Rows < 0 {
		return newError(InvalidField, "rows", -1, "negative row count")
	}
	seen := make(map[string]bool, len(t.Columns))
	for i := range t.Columns {
		c := &t.Columns[i]
		field := "columns[" + strconv.Itoa(i) + "]"
		if c.Name == "" || seen[c.Name] {
			return newError(InvalidField, field+".name", -1, field+": column names must be non-empty and unique")
		}
		seen[c.Name] = true
		if !c.Type.Valid() {
			return newError(UnknownDType, field+".type", -1, field+": invalid column type "+c.Type.String())
		}
		if (c.Type == ColumnFloat32Vector) != (c.Dimensions > 0) || c.Dimensions > maxVectorDims {
			return newError(InvalidField, field+".dimensions", -1, field+": dimensions must be >= 1 for float32[d] and 0 otherwise")
		}
		if c.Type == ColumnString {
			if len(c.Strings) != t.Rows {
				return newError(ShapeMismatch, field, -1, field+" has "+strconv.Itoa(len(c.Strings))+" strings for "+strconv.Itoa(t.Rows)+" rows")
			}
			for _, s := range c.Strings {
				if !utf8.ValidString(s) {
					return newError(Malformed, field, -1, field+" has a string that is not UTF-8")
				}
			}
			continue
		}
		w := c.Width()
		if t.Rows > 0 && w > maxInt/t.Rows || len(c.Data) != t.Rows*w {
			return newError(LengthMismatch, field+".data", -1, field+" has "+strconv.Itoa(len(c.Data))+" bytes, "+
				strconv.Itoa(t.Rows)+" rows of "+c.TypeName()+" need "+strconv.Itoa(t.Rows*w))
		}
		if c.Type == ColumnBool {
			for r, b := range c.Data {
				if b > 1 {
					return newError(InvalidField, field+".data["+strconv.Itoa(r)+"]", -1, "bool byte "+strconv.Itoa(int(b)))
				}
			}
		}
	}
	return nil
}

func (c *Column) want(t ColumnType) error {
	if c == nil {
		return newError(InvalidField, "", -1, "no such column")
	}
	if c.Type != t {
		return newError(InvalidField, c.Name, -1, "column "+strconv.Quote(c.Name)+" is "+c.TypeName()+", not "+t.String())
	}
	return nil
}

// Len is the number of values of the column (rows).
func (c *Column) Len() int {
	if c.Type == ColumnString {
		return len(c.Strings)
	}
	if w := c.Width(); w > 0 {
		return len(c.Data) / w
	}
	return 0
}

// aligned reports whether b can be viewed as items of the given alignment on this host.
func aligned(b []byte, align uintptr) bool {
	return hostLittleEndian && (len(b) == 0 || uintptr(unsafe.Pointer(unsafe.SliceData(b)))%align == 0)
}

// viewOrCopy returns the little-endian items of b as []T, viewing b when aligned.
func viewOrCopy[T int32 | int64 | float32 | float64](b []byte) []T {
	var zero T
	size := int(unsafe.Sizeof(zero))
	n := len(b) / size
	if n == 0 {
		return []T{}
	}
	if aligned(b, unsafe.Alignof(zero)) {
		return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)
	}
	out := make([]T, n)
	if hostLittleEndian {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(out))), n*size), b)
		return out
	}
	for i := range out {
		switch size {
		case 4:
			v := uint32(b[4*i]) | uint32(b[4*i+1])<<8 | uint32(b[4*i+2])<<16 | uint32(b[4*i+3])<<24
			*(*uint32)(unsafe.Pointer(&out[i])) = v
		case 8:
			*(*uint64)(unsafe.Pointer(&out[i])) = le64(b[8*i:])
		}
	}
	return out
}

// Bools returns the values of a bool column (a view of Data: its bytes are 0 or 1).
func (c *Column) Bools() ([]bool, error) {
	if err := c.want(ColumnBool); err != nil {
		return nil, err
	}
	if len(c.Data) == 0 {
		return []bool{}, nil
	}
	return unsafe.Slice((*bool)(unsafe.Pointer(unsafe.SliceData(c.Data))), len(c.Data)), nil
}

// Int32 returns the values of an int32 column.
func (c *Column) Int32() ([]int32, error) {
	if err := c.want(ColumnInt32); err != nil {
		return nil, err
	}
	return viewOrCopy[int32](c.Data), nil
}

// Int64 returns the values of an int64 column.
func (c *Column) Int64() ([]int64, error) {
	if err := c.want(ColumnInt64); err != nil {
		return nil, err
	}
	return viewOrCopy[int64](c.Data), nil
}

// Float32 returns the values of a float32 column.
func (c *Column) Float32() ([]float32, error) {
	if err := c.want(ColumnFloat32); err != nil {
		return nil, err
	}
	return viewOrCopy[float32](c.Data), nil
}

// Float64 returns the values of a float64 column.
func (c *Column) Float64() ([]float64, error) {
	if err := c.want(ColumnFloat64); err != nil {
		return nil, err
	}
	return viewOrCopy[float64](c.Data), nil
}

// StringValues returns the values of a string column.
func (c *Column) StringValues() ([]string, error) {
	if err := c.want(ColumnString); err != nil {
		return nil, err
	}
	return c.Strings, nil
}

// UUIDs returns the values of a uuid column, each 16 bytes in RFC 9562 order (a view of Data).
func (c *Column) UUIDs() ([][16]byte, error) {
	if err := c.want(ColumnUUID); err != nil {
		return nil, err
	}
	if len(c.Data) == 0 {
		return [][16]byte{}, nil
	}
	return unsafe.Slice((*[16]byte)(unsafe.Pointer(unsafe.SliceData(c.Data))), len(c.Data)/16), nil
}

// Vectors returns the items of a float32[d] column, Rows*d float32 row-major, and d.
func (c *Column) Vectors() ([]float32, int, error) {
	if err := c.want(ColumnFloat32Vector); err != nil {
		return nil, 0, err
	}
	return viewOrCopy[float32](c.Data), c.Dimensions, nil
}

// Tensor returns a float32[d] column as a (Rows, d) float32 Tensor sharing Data.
func (c *Column) Tensor() (*Tensor, error) {
	if err := c.want(ColumnFloat32Vector); err != nil {
		return nil, err
	}
	return NewTensor(Float32, len(c.Data)/(4*c.Dimensions), c.Dimensions, c.Data)
}

// FormatUUID writes a uuid in its canonical lowercase text form.
func FormatUUID(u [16]byte) string {
	return string(appendUUID(make([]byte, 0, 36), u[:]))
}

func appendUUID(dst, u []byte) []byte {
	const hex = "0123456789abcdef"
	for i, b := range u[:16] {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			dst = append(dst, '-')
		}
		dst = append(dst, hex[b>>4], hex[b&15])
	}
	return dst
}

// ParseUUID reads the canonical text form xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx (either case).
func ParseUUID(s string) ([16]byte, bool) {
	var u [16]byte
	return u, parseUUIDInto(u[:], s)
}

func parseUUIDInto(dst []byte, s string) bool {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return false
	}
	j := 0
	for i := 0; i < 36; i++ {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			continue
		}
		hi, ok1 := unhex(s[i])
		lo, ok2 := unhex(s[i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[j] = hi<<4 | lo
		j++
		i++
	}
	return true
}
