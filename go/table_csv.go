package densewire

import (
	"bytes"
	"encoding/binary"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// CSV tables (SPEC.md section 15.4): RFC 4180, a header line of the column names, CRLF (LF also
// read), fields quoted when needed with "" for a quote. The types come from the caller
// (Densewire-Columns). Parsed with a byte scanner, not encoding/csv: no string per field, and the
// spec's errors.

type csvScanner struct {
	b    []byte
	i    int
	line int    // the record being read, the header being line 1
	buf  []byte // unescaped quoted field
}

// field reads one field; end reports that it ended its record (line break or end of input).
func (s *csvScanner) field() (f []byte, end bool, err *Error) {
	b := s.b
	if s.i < len(b) && b[s.i] == '"' {
		s.buf = s.buf[:0]
		i := s.i + 1
		for {
			q := bytes.IndexByte(b[i:], '"')
			if q < 0 {
				return nil, false, newError(Truncated, "line "+strconv.Itoa(s.line), len(b),
					"line "+strconv.Itoa(s.line)+": a quoted field is not terminated before the end of the body (offset "+strconv.Itoa(len(b))+")")
			}
			s.buf = append(s.buf, b[i:i+q]...)
			i += q + 1
			if i < len(b) && b[i] == '"' { // an escaped quote
				s.buf = append(s.buf, '"')
				i++
				continue
			}
			break
		}
		s.i = i
		f = s.buf
	} else {
		start := s.i
		j := start
		for j < len(b) && b[j] != ',' && b[j] != '\n' && b[j] != '\r' {
			j++
		}
		s.i = j
		f = b[start:j]
	}
	switch {
	case s.i >= len(b):
		return f, true, nil
	case b[s.i] == ',':
		s.i++
		return f, false, nil
	case b[s.i] == '\r':
		s.i++
		if s.i < len(b) && b[s.i] == '\n' {
			s.i++
		}
		return f, true, nil
	case b[s.i] == '\n':
		s.i++
		return f, true, nil
	}
	return nil, false, newError(Malformed, "line "+strconv.Itoa(s.line), s.i,
		"line "+strconv.Itoa(s.line)+": unexpected character after a quoted field at offset "+strconv.Itoa(s.i))
}

// DecodeTableCSV decodes a CSV table whose columns (names and types) come from the caller, usually
// from the Densewire-Columns header (ParseTableHeaders). Errors: a header line other than the
// column names in order: ShapeMismatch on "header"; a line with another number of fields:
// ShapeMismatch on "line L" (the header is line 1; L counts records); a field that does not parse
// as its type (or is not UTF-8): InvalidField on "line L, COLUMN"; an unterminated quoted field:
// Truncated at len(body).
func DecodeTableCSV(body []byte, name string, columns []ColumnSpec) (*Table, error) {
	return asError(decodeTableCSV(body, name, columns))
}

func decodeTableCSV(body []byte, name string, columns []ColumnSpec) (*Table, *Error) {
	s := &csvScanner{b: body, line: 1}
	// the header
	var header [][]byte
	for s.i < len(body) {
		f, end, err := s.field()
		if err != nil {
			return nil, err
		}
		header = append(header, bytes.Clone(f))
		if end {
			break
		}
	}
	ok := len(header) == len(columns)
	for j := 0; ok && j < len(columns); j++ {
		ok = string(header[j]) == columns[j].Name
	}
	if !ok {
		names := make([]string, len(header))
		for j, h := range header {
			names[j] = string(h)
		}
		return nil, newError(ShapeMismatch, "header", 0, "the header line names "+strconv.Quote(string(bytes.Join(header, []byte(","))))+
			", the table's columns are "+strconv.Quote(FormatColumnsHeader(columns)))
	}
	// capacity hint: at most one row a line break
	lines := bytes.Count(body[s.i:], []byte{'\n'}) + 1
	cols := make([]colBuilder, len(columns))
	for j, c := range columns {
		cols[j].spec = c
		if c.Type == ColumnString {
			cols[j].strs = make([]string, 0, min(lines, len(body)))
		} else {
			cols[j].data = make([]byte, 0, min(lines*c.Width(), 4*len(body)+64))
		}
	}
	row := 0
	for s.i < len(body) {
		s.line = row + 2
		lineStart := s.i
		j := 0
		for {
			f, end, err := s.field()
			if err != nil {
				return nil, err
			}
			if j < len(cols) {
				if e := cols[j].putCSV(f, row, s.line); e != nil {
					e.Offset = lineStart
					return nil, e
				}
			}
			j++
			if end {
				break
			}
		}
		if j != len(cols) {
			f := "line " + strconv.Itoa(s.line)
			return nil, newError(ShapeMismatch, f, lineStart, f+" has "+strconv.Itoa(j)+" fields, the table has "+strconv.Itoa(len(cols))+" columns")
		}
		row++
	}
	return buildTable(name, row, cols), nil
}

func csvBad(c *colBuilder, line int, f []byte, want string) *Error {
	field := "line " + strconv.Itoa(line) + ", " + c.spec.Name
	if len(f) > 40 {
		f = append(f[:37:37], "..."...)
	}
	return newError(InvalidField, field, -1, field+": "+strconv.Quote(string(f))+" is not "+want)
}

// csvFloat parses a float field: a decimal number, or NaN, Infinity, -Infinity.
func csvFloat(f []byte) (float64, bool) {
	switch string(f) {
	case "NaN":
		return math.Float64frombits(0x7FF8000000000000), true // the canonical quiet NaN (math.NaN has a payload)
	case "Infinity":
		return math.Inf(1), true
	case "-Infinity":
		return math.Inf(-1), true
	}
	p := &jsonScanner{b: f}
	if len(f) == 0 || p.number() != nil || p.i != len(f) {
		return 0, false
	}
	x, err := strconv.ParseFloat(stringView(f), 64)
	return x, err == nil || isRangeErr(err)
}

// outOfFloatRange reports a decimal number (x, parsed as float64) beyond float64, or beyond
// float32 when f32: only the words NaN, Infinity and -Infinity spell non-finite values (SPEC.md 15.3, 15.4).
func outOfFloatRange(x float64, f32 bool) bool {
	return math.IsInf(x, 0) || f32 && math.IsInf(float64(Float64ToFloat32(x)), 0)
}

func isInfinityWord(f []byte) bool { return string(f) == "Infinity" || string(f) == "-Infinity" }

func (cb *colBuilder) grow(w int) []byte {
	n := len(cb.data)
	cb.data = slices.Grow(cb.data, w)[:n+w]
	return cb.data[n:]
}

func (cb *colBuilder) putCSV(f []byte, row, line int) *Error {
	switch cb.spec.Type {
	case ColumnBool:
		switch string(f) {
		case "true":
			cb.data = append(cb.data, 1)
		case "false":
			cb.data = append(cb.data, 0)
		default:
			return csvBad(cb, line, f, "a bool (true or false)")
		}
	case ColumnInt32, ColumnInt64:
		bits, w := 32, 4
		if cb.spec.Type == ColumnInt64 {
			bits, w = 64, 8
		}
		v, err := strconv.ParseInt(stringView(f), 10, bits)
		if err != nil {
			return csvBad(cb, line, f, "an "+cb.spec.Type.String())
		}
		dst := cb.grow(w)
		if w == 4 {
			binary.LittleEndian.PutUint32(dst, uint32(v))
		} else {
			binary.LittleEndian.PutUint64(dst, uint64(v))
		}
	case ColumnFloat32, ColumnFloat64:
		x, ok := csvFloat(f)
		if !ok {
			return csvBad(cb, line, f, "a number")
		}
		if !isInfinityWord(f) && outOfFloatRange(x, cb.spec.Type == ColumnFloat32) {
			return csvBad(cb, line, f, "a number within the "+cb.spec.Type.String()+" range")
		}
		if cb.spec.Type == ColumnFloat32 {
			binary.LittleEndian.PutUint32(cb.grow(4), f32bits(Float64ToFloat32(x)))
		} else {
			binary.LittleEndian.PutUint64(cb.grow(8), f64bits(x))
		}
	case ColumnString:
		if !utf8.Valid(f) {
			return csvBad(cb, line, f, "UTF-8 text")
		}
		cb.strs = append(cb.strs, string(f))
	case ColumnUUID:
		if !parseUUIDInto(cb.grow(16), stringView(f)) {
			cb.data = cb.data[:len(cb.data)-16]
			return csvBad(cb, line, f, "a uuid")
		}
	case ColumnFloat32Vector:
		d := cb.spec.Dimensions
		if len(f) < 2 || f[0] != '[' || f[len(f)-1] != ']' || bytes.Count(f, []byte{','}) != d-1 {
			return csvBad(cb, line, f, "a "+cb.spec.TypeName()+" vector [v1,...,v"+strconv.Itoa(d)+"]")
		}
		dst := cb.grow(4 * d)
		items := f[1 : len(f)-1]
		for j := 0; j < d; j++ {
			item := items
			if k := bytes.IndexByte(items, ','); k >= 0 {
				item, items = items[:k], items[k+1:]
			}
			item = bytes.TrimSpace(item)
			x, ok := csvFloat(item)
			if ok && !isInfinityWord(item) && outOfFloatRange(x, true) {
				cb.data = cb.data[:len(cb.data)-4*d]
				return csvBad(cb, line, f, "a "+cb.spec.TypeName()+" vector within the float32 range (item "+strconv.Itoa(j)+")")
			}
			if !ok {
				cb.data = cb.data[:len(cb.data)-4*d]
				return csvBad(cb, line, f, "a "+cb.spec.TypeName()+" vector (item "+strconv.Itoa(j)+")")
			}
			binary.LittleEndian.PutUint32(dst[4*j:], f32bits(Float64ToFloat32(x)))
		}
	}
	return nil
}

// appendCSVField writes f, quoted when it contains , " CR or LF, is empty, starts or ends with a
// space, or starts with U+FEFF (else read back as a byte order mark).
func appendCSVField(dst []byte, f string) []byte {
	if f != "" && f[0] != ' ' && f[len(f)-1] != ' ' && !containsAny(f) && !strings.HasPrefix(f, "\uFEFF") {
		return append(dst, f...)
	}
	dst = append(dst, '"')
	for i := 0; i < len(f); i++ {
		if f[i] == '"' {
			dst = append(dst, '"')
		}
		dst = append(dst, f[i])
	}
	return append(dst, '"')
}

func containsAny(f string) bool {
	for i := 0; i < len(f); i++ {
		switch f[i] {
		case ',', '"', '\r', '\n':
			return true
		}
	}
	return false
}

func appendCSVFloat(dst []byte, x float64, bits int) []byte {
	switch {
	case math.IsNaN(x):
		return append(dst, "NaN"...)
	case math.IsInf(x, 1):
		return append(dst, "Infinity"...)
	case math.IsInf(x, -1):
		return append(dst, "-Infinity"...)
	}
	start := len(dst)
	return fixNumber(strconv.AppendFloat(dst, x, 'g', -1, bits), start)
}

// EncodeTableCSV writes the table as CSV (SPEC.md section 15.4): a header line, CRLF after every
// line, NaN and infinities as NaN, Infinity, -Infinity, vectors as quoted "[v1,v2,...]".
func EncodeTableCSV(t *Table) ([]byte, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	dst := make([]byte, 0, 64+t.Rows*12*len(t.Columns))
	for j := range t.Columns {
		if j > 0 {
			dst = append(dst, ',')
		}
		dst = appendCSVField(dst, t.Columns[j].Name)
	}
	dst = append(dst, '\r', '\n')
	for r := 0; r < t.Rows; r++ {
		for j := range t.Columns {
			c := &t.Columns[j]
			if j > 0 {
				dst = append(dst, ',')
			}
			switch c.Type {
			case ColumnString:
				dst = appendCSVField(dst, c.Strings[r])
			case ColumnFloat32:
				dst = appendCSVFloat(dst, float64(f32frombits(binary.LittleEndian.Uint32(c.Data[4*r:]))), 32)
			case ColumnFloat64:
				dst = appendCSVFloat(dst, f64frombits(le64(c.Data[8*r:])), 64)
			case ColumnFloat32Vector:
				dst = append(dst, `"[`...)
				d := c.Dimensions
				for k := 0; k < d; k++ {
					if k > 0 {
						dst = append(dst, ',')
					}
					dst = appendCSVFloat(dst, float64(f32frombits(binary.LittleEndian.Uint32(c.Data[4*(d*r+k):]))), 32)
				}
				dst = append(dst, `]"`...)
			default:
				dst, _ = appendJSONValue(dst, c, r)
				if c.Type == ColumnUUID { // JSON quotes it; CSV need not
					n := len(dst)
					copy(dst[n-38:], dst[n-37:n-1])
					dst = dst[:n-2]
				}
			}
		}
		dst = append(dst, '\r', '\n')
	}
	return dst, nil
}
