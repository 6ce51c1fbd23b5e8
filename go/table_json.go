package densewire

import (
	"encoding/binary"
	"math"
	"strconv"
)

// The three JSON layouts of tables (SPEC.md section 15.3). Decoding validates the whole text first
// (jsonscan.go: every syntax error, NaN and Infinity included, is Malformed at its offset), then
// walks it again decoding each value straight into its column's buffer.

// jpath names a value for error messages without building strings on the happy path.
type jpath struct {
	layout   TableFormat
	row, col int
	key      string
}

func (p jpath) String() string {
	switch p.layout {
	case TableJSON:
		return "[" + strconv.Itoa(p.row) + "]." + p.key
	case TableJSONRows:
		return "rows[" + strconv.Itoa(p.row) + "][" + strconv.Itoa(p.col) + "]"
	}
	return "columns[" + strconv.Itoa(p.col) + "].values[" + strconv.Itoa(p.row) + "]"
}

// colBuilder receives the values of one column.
type colBuilder struct {
	spec ColumnSpec
	data []byte
	strs []string
}

// A valid text holds at least one character for every 4 bytes of values (a float64 "1," is 8
// bytes for 2 characters, a vector item 4 bytes for 2), so a schema that would need far more than
// the body can hold (a hostile float32[16777216] over a few rows) is refused before allocating.
func newColBuilders(specs []ColumnSpec, n int, bodyLen int) ([]colBuilder, *Error) {
	need := 0
	for _, s := range specs {
		w := max(s.Width(), 16) // a string header is 16 bytes
		if n > 0 && w > (maxInt-need)/n {
			need = maxInt
			break
		}
		need += n * w
	}
	if need > 16*bodyLen+1<<16 {
		return nil, newError(ShapeMismatch, "", -1, "the body is too short to hold "+strconv.Itoa(n)+" rows of these columns")
	}
	out := make([]colBuilder, len(specs))
	for i, s := range specs {
		out[i].spec = s
		if s.Type == ColumnString {
			out[i].strs = make([]string, n)
		} else {
			out[i].data = make([]byte, n*s.Width())
		}
	}
	return out, nil
}

func buildTable(name string, n int, cols []colBuilder) *Table {
	t := &Table{Name: name, Rows: n, Columns: make([]Column, len(cols))}
	for i := range cols {
		t.Columns[i] = Column{ColumnSpec: cols[i].spec, Data: cols[i].data, Strings: cols[i].strs}
	}
	return t
}

func wrongKind(p jpath, off int, want string, body []byte, s span) *Error {
	f := p.String()
	tok := body[s.start:s.end]
	if len(tok) > 40 {
		tok = append(tok[:37:37], "..."...)
	}
	return newError(InvalidField, f, off, f+": "+string(tok)+" is not "+want)
}

// put decodes the JSON value at s as value row of the column.
func (cb *colBuilder) put(body []byte, s span, row int, p jpath) *Error {
	tok := body[s.start:s.end]
	switch cb.spec.Type {
	case ColumnBool:
		switch string(tok) {
		case "true":
			cb.data[row] = 1
		case "false":
			cb.data[row] = 0
		default:
			return wrongKind(p, s.start, "a bool", body, s)
		}
	case ColumnInt32, ColumnInt64:
		bits, what := 32, "an int32"
		if cb.spec.Type == ColumnInt64 {
			bits, what = 64, "an int64"
		}
		if !isJSONInteger(body, s) {
			return wrongKind(p, s.start, what, body, s)
		}
		v, err := strconv.ParseInt(stringView(tok), 10, bits)
		if err != nil {
			return wrongKind(p, s.start, what+" (out of range)", body, s)
		}
		if bits == 32 {
			binary.LittleEndian.PutUint32(cb.data[4*row:], uint32(v))
		} else {
			binary.LittleEndian.PutUint64(cb.data[8*row:], uint64(v))
		}
	case ColumnFloat32, ColumnFloat64:
		if c := tok[0]; c != '-' && (c < '0' || c > '9') {
			return wrongKind(p, s.start, "a number", body, s)
		}
		x, err := strconv.ParseFloat(stringView(tok), 64)
		if err != nil && !isRangeErr(err) {
			return newError(Malformed, p.String(), s.start, "invalid number at offset "+strconv.Itoa(s.start))
		}
		if outOfFloatRange(x, cb.spec.Type == ColumnFloat32) { // JSON has no infinities (SPEC.md 15.3)
			return wrongKind(p, s.start, "a number within the "+cb.spec.Type.String()+" range", body, s)
		}
		if cb.spec.Type == ColumnFloat32 {
			binary.LittleEndian.PutUint32(cb.data[4*row:], f32bits(Float64ToFloat32(x)))
		} else {
			binary.LittleEndian.PutUint64(cb.data[8*row:], f64bits(x))
		}
	case ColumnString:
		str, ok := jsonString(body, s)
		if !ok {
			return wrongKind(p, s.start, "a string", body, s)
		}
		cb.strs[row] = str
	case ColumnUUID:
		if tok[0] != '"' {
			return wrongKind(p, s.start, "a uuid string", body, s)
		}
		str, _ := jsonStringView(body, s)
		if !parseUUIDInto(cb.data[16*row:16*row+16], str) {
			return wrongKind(p, s.start, "a uuid (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)", body, s)
		}
	case ColumnFloat32Vector:
		if tok[0] != '[' {
			return wrongKind(p, s.start, "an array of numbers", body, s)
		}
		d := cb.spec.Dimensions
		dst := cb.data[4*d*row : 4*d*(row+1)]
		if e := decodeNumberRow(body, s, Float32, d, dst, ""); e != nil {
			f := p.String()
			e.Field = f + e.Field
			e.Message = f + e.Message
			return e
		}
		for j := 0; j < d; j++ { // an infinity here is a number beyond float32: JSON has no infinities
			if binary.LittleEndian.Uint32(dst[4*j:])&0x7FFFFFFF == 0x7F800000 {
				f := p.String() + "[" + strconv.Itoa(j) + "]"
				return newError(InvalidField, f, s.start, f+": a number beyond the float32 range (largest finite 3.4028235e38)")
			}
		}
	}
	return nil
}

// validateJSON checks the whole text (one value, nothing after it) and returns the element count
// of a top-level array (-1 for another value).
func validateJSON(body []byte) (int, *Error) {
	p := &jsonScanner{b: body}
	count := -1
	var err *Error
	if p.peek() == '[' {
		count, err = p.array(0, func(int) *Error { _, e := p.value(1); return e })
	} else {
		_, err = p.value(0)
	}
	if err != nil {
		return 0, err
	}
	if !p.atEnd() {
		return 0, p.syntax("data after the JSON value")
	}
	return count, nil
}

// DecodeTableJSON decodes the JSON objects layout (application/json: an array of one object a
// row), whose columns (names and types) come from the caller, usually from the Densewire-Columns
// header (ParseTableHeaders). Errors: invalid JSON (also NaN, Infinity): Malformed at the offset;
// a body that is not an array: Malformed; a row that is not an object, a missing, unknown or
// repeated key, or a value of the wrong kind or out of range: InvalidField on [ROW] or [ROW].KEY.
func DecodeTableJSON(body []byte, name string, columns []ColumnSpec) (*Table, error) {
	return asError(decodeTableJSONObjects(body, name, columns))
}

func decodeTableJSONObjects(body []byte, name string, columns []ColumnSpec) (*Table, *Error) {
	n, err := validateJSON(body)
	if err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, newError(Malformed, "", 0, "a JSON objects table is an array of objects, one a row")
	}
	cols, err := newColBuilders(columns, n, len(body))
	if err != nil {
		return nil, err
	}
	index := make(map[string]int, len(columns))
	for i, c := range columns {
		index[c.Name] = i
	}
	seen := make([]int, len(columns)) // the row+1 at which each key was last seen
	p := &jsonScanner{b: body}
	_, err = p.array(0, func(row int) *Error {
		if p.peek() != '{' {
			v, _ := p.value(1)
			f := "[" + strconv.Itoa(row) + "]"
			return newError(InvalidField, f, v.start, f+" is not an object")
		}
		next := 0 // keys usually come in column order: try the expected one first
		e := p.object(1, func(key string, depth int) *Error {
			v, _ := p.value(depth)
			j := -1
			if next < len(columns) && columns[next].Name == key {
				j = next
			} else if k, ok := index[key]; ok {
				j = k
			}
			path := jpath{layout: TableJSON, row: row, key: key}
			if j < 0 {
				return newError(InvalidField, path.String(), v.start, path.String()+" is not a column of the table")
			}
			if seen[j] == row+1 {
				return newError(InvalidField, path.String(), v.start, path.String()+" appears twice")
			}
			seen[j] = row + 1
			next = j + 1
			return cols[j].put(body, v, row, path)
		})
		if e != nil {
			return e
		}
		for j := range columns {
			if seen[j] != row+1 {
				path := jpath{layout: TableJSON, row: row, key: columns[j].Name}
				return newError(InvalidField, path.String(), p.i, path.String()+" is missing")
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return buildTable(name, n, cols), nil
}

// jsonSchemaColumns reads the "columns" array of the rows layout ([{"name", "type"}, ...]).
func jsonColumnSpecs(body []byte, s span, withValues bool) ([]ColumnSpec, []span, *Error) {
	if body[s.start] != '[' {
		return nil, nil, newError(InvalidField, "columns", s.start, "columns is not an array")
	}
	var (
		specs  []ColumnSpec
		values []span
	)
	seen := map[string]bool{}
	p := &jsonScanner{b: body[:s.end], i: s.start}
	_, err := p.array(0, func(i int) *Error {
		field := "columns[" + strconv.Itoa(i) + "]"
		if p.peek() != '{' {
			v, _ := p.value(1)
			return newError(InvalidField, field, v.start, field+" is not an object")
		}
		start := p.i
		nameS, typeS, valS := noSpan, noSpan, noSpan
		p.object(1, func(key string, depth int) *Error {
			v, _ := p.value(depth)
			switch key {
			case "name":
				nameS = v
			case "type":
				typeS = v
			case "values":
				valS = v
			}
			return nil
		})
		if isNull(body, nameS) {
			return newError(InvalidField, field+".name", start, "missing key "+field+".name")
		}
		name, ok := jsonString(body, nameS)
		if !ok || name == "" {
			return newError(InvalidField, field+".name", nameS.start, field+".name is not a non-empty string")
		}
		if seen[name] {
			return newError(InvalidField, field+".name", nameS.start, field+": column "+strconv.Quote(name)+" appears twice")
		}
		seen[name] = true
		if isNull(body, typeS) {
			return newError(InvalidField, field+".type", start, "missing key "+field+".type")
		}
		tname, ok := jsonString(body, typeS)
		if !ok {
			return newError(InvalidField, field+".type", typeS.start, field+".type is not a string")
		}
		typ, d, err := ParseColumnType(tname)
		if err != nil {
			e := err.(*Error)
			e.Field, e.Offset, e.Message = field+".type", typeS.start, field+".type: "+e.Message
			return e
		}
		if withValues {
			if isNull(body, valS) {
				return newError(InvalidField, field+".values", start, "missing key "+field+".values")
			}
			if body[valS.start] != '[' {
				return newError(InvalidField, field+".values", valS.start, field+".values is not an array")
			}
			values = append(values, valS)
		}
		specs = append(specs, ColumnSpec{Name: name, Type: typ, Dimensions: d})
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return specs, values, nil
}

// topLevel records the spans of the keys of a top-level object.
func topLevel(body []byte, what string, keys ...string) ([]span, *Error) {
	if _, err := validateJSON(body); err != nil {
		return nil, err
	}
	p := &jsonScanner{b: body}
	if p.peek() != '{' {
		return nil, newError(Malformed, "", 0, "a "+what+" table is a JSON object")
	}
	spans := make([]span, len(keys))
	for i := range spans {
		spans[i] = noSpan
	}
	p.object(0, func(key string, depth int) *Error {
		v, _ := p.value(depth)
		for i, k := range keys {
			if k == key {
				spans[i] = v
			}
		}
		return nil
	})
	return spans, nil
}

func jsonTableName(body []byte, s span) (string, *Error) {
	if isNull(body, s) {
		return "", nil
	}
	name, ok := jsonString(body, s)
	if !ok {
		return "", newError(InvalidField, "name", s.start, "name is not a string")
	}
	return name, nil
}

// DecodeTableJSONRows decodes the rows layout (application/vnd.densewire.rows+json):
// {"name", "columns": [{"name", "type"}], "rows": [[...], ...]}. Errors as DecodeTableJSON, and: a
// missing or mistyped name, columns or rows: InvalidField; an unknown type: UnknownDType on
// columns[COL].type; a row of the wrong length: ShapeMismatch on rows[ROW]; a bad value:
// InvalidField on rows[ROW][COL].
func DecodeTableJSONRows(body []byte) (*Table, error) {
	return asError(decodeTableJSONRows(body))
}

func decodeTableJSONRows(body []byte) (*Table, *Error) {
	spans, err := topLevel(body, "json-rows", "name", "columns", "rows")
	if err != nil {
		return nil, err
	}
	name, err := jsonTableName(body, spans[0])
	if err != nil {
		return nil, err
	}
	if isNull(body, spans[1]) {
		return nil, newError(InvalidField, "columns", -1, "missing key columns")
	}
	specs, _, err := jsonColumnSpecs(body, spans[1], false)
	if err != nil {
		return nil, err
	}
	rs := spans[2]
	if isNull(body, rs) {
		return nil, newError(InvalidField, "rows", -1, "missing key rows")
	}
	if body[rs.start] != '[' {
		return nil, newError(InvalidField, "rows", rs.start, "rows is not an array")
	}
	p := &jsonScanner{b: body[:rs.end], i: rs.start}
	n, _ := p.array(0, func(int) *Error { _, e := p.value(1); return e })
	cols, err := newColBuilders(specs, n, len(body))
	if err != nil {
		return nil, err
	}
	p = &jsonScanner{b: body[:rs.end], i: rs.start}
	_, err = p.array(0, func(row int) *Error {
		f := "rows[" + strconv.Itoa(row) + "]"
		if p.peek() != '[' {
			v, _ := p.value(1)
			return newError(InvalidField, f, v.start, f+" is not an array")
		}
		start := p.i
		count, e := p.array(1, func(j int) *Error {
			v, _ := p.value(2)
			if j >= len(cols) {
				return nil // counted, reported below
			}
			return cols[j].put(body, v, row, jpath{layout: TableJSONRows, row: row, col: j})
		})
		if e != nil {
			return e
		}
		if count != len(cols) {
			return newError(ShapeMismatch, f, start, f+" has "+strconv.Itoa(count)+" values, the table has "+strconv.Itoa(len(cols))+" columns")
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return buildTable(name, n, cols), nil
}

// DecodeTableJSONColumns decodes the columns layout (application/vnd.densewire.columns+json):
// {"name", "rows": n, "columns": [{"name", "type", "values": [...]}]}. Errors as DecodeTableJSON,
// and: a values array whose length is not rows: ShapeMismatch on columns[COL].values; a vector of
// the wrong length: ShapeMismatch on columns[COL].values[ROW]; a bad value: InvalidField on
// columns[COL].values[ROW].
func DecodeTableJSONColumns(body []byte) (*Table, error) {
	return asError(decodeTableJSONColumns(body))
}

func decodeTableJSONColumns(body []byte) (*Table, *Error) {
	spans, err := topLevel(body, "json-columns", "name", "rows", "columns")
	if err != nil {
		return nil, err
	}
	name, err := jsonTableName(body, spans[0])
	if err != nil {
		return nil, err
	}
	if isNull(body, spans[1]) {
		return nil, newError(InvalidField, "rows", -1, "missing key rows")
	}
	nrows, ok := jsonUint(body, spans[1])
	if !ok || nrows > uint64(maxInt) {
		return nil, newError(InvalidField, "rows", spans[1].start, "rows is not a non-negative integer")
	}
	n := int(nrows)
	if isNull(body, spans[2]) {
		return nil, newError(InvalidField, "columns", -1, "missing key columns")
	}
	specs, values, err := jsonColumnSpecs(body, spans[2], true)
	if err != nil {
		return nil, err
	}
	// count every values array before allocating: a declared rows cannot allocate more than the body holds
	for i, vs := range values {
		p := &jsonScanner{b: body[:vs.end], i: vs.start}
		count, _ := p.array(0, func(int) *Error { _, e := p.value(1); return e })
		if count != n {
			f := "columns[" + strconv.Itoa(i) + "].values"
			return nil, newError(ShapeMismatch, f, vs.start, f+" has "+strconv.Itoa(count)+" values, rows is "+strconv.Itoa(n))
		}
	}
	cols, err := newColBuilders(specs, n, len(body))
	if err != nil {
		return nil, err
	}
	for i, vs := range values {
		p := &jsonScanner{b: body[:vs.end], i: vs.start}
		_, err := p.array(0, func(row int) *Error {
			v, _ := p.value(1)
			return cols[i].put(body, v, row, jpath{layout: TableJSONColumns, row: row, col: i})
		})
		if err != nil {
			return nil, err
		}
	}
	return buildTable(name, n, cols), nil
}

// appendJSONValue writes value row of column c (SPEC.md section 15.3); NaN and infinities are
// NonFinite on COLUMN[ROW].
func appendJSONValue(dst []byte, c *Column, row int) ([]byte, *Error) {
	switch c.Type {
	case ColumnBool:
		if c.Data[row] != 0 {
			return append(dst, "true"...), nil
		}
		return append(dst, "false"...), nil
	case ColumnInt32:
		return strconv.AppendInt(dst, int64(int32(binary.LittleEndian.Uint32(c.Data[4*row:]))), 10), nil
	case ColumnInt64:
		return strconv.AppendInt(dst, int64(le64(c.Data[8*row:])), 10), nil
	case ColumnFloat32:
		return appendJSONFloat(dst, float64(f32frombits(binary.LittleEndian.Uint32(c.Data[4*row:]))), 32, c, row)
	case ColumnFloat64:
		return appendJSONFloat(dst, f64frombits(le64(c.Data[8*row:])), 64, c, row)
	case ColumnString:
		return appendJSONString(dst, c.Strings[row]), nil
	case ColumnUUID:
		dst = append(dst, '"')
		dst = appendUUID(dst, c.Data[16*row:])
		return append(dst, '"'), nil
	case ColumnFloat32Vector:
		d := c.Dimensions
		dst = append(dst, '[')
		for j := 0; j < d; j++ {
			if j > 0 {
				dst = append(dst, ',')
			}
			var e *Error
			if dst, e = appendJSONFloat(dst, float64(f32frombits(binary.LittleEndian.Uint32(c.Data[4*(d*row+j):]))), 32, c, row); e != nil {
				return nil, e
			}
		}
		return append(dst, ']'), nil
	}
	return dst, nil
}

func appendJSONFloat(dst []byte, x float64, bits int, c *Column, row int) ([]byte, *Error) {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		f := c.Name + "[" + strconv.Itoa(row) + "]"
		return nil, newError(NonFinite, f, -1, f+": "+strconv.FormatFloat(x, 'g', -1, 64)+
			" has no JSON number form (use CSV or a binary format)")
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, x, 'g', -1, bits)
	return fixNumber(dst, start), nil
}

// EncodeTableJSON writes the table in one of the JSON layouts (TableJSON, TableJSONRows,
// TableJSONColumns). A NaN or infinite float is a NonFinite error on COLUMN[ROW].
func EncodeTableJSON(t *Table, layout TableFormat) ([]byte, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	dst := make([]byte, 0, 64+t.Rows*16*len(t.Columns))
	var e *Error
	switch layout {
	case TableJSON:
		keys := make([][]byte, len(t.Columns))
		for j := range t.Columns {
			keys[j] = append(appendJSONString(nil, t.Columns[j].Name), ':')
		}
		dst = append(dst, '[')
		for r := 0; r < t.Rows; r++ {
			if r > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, '{')
			for j := range t.Columns {
				if j > 0 {
					dst = append(dst, ',')
				}
				dst = append(dst, keys[j]...)
				if dst, e = appendJSONValue(dst, &t.Columns[j], r); e != nil {
					return nil, e
				}
			}
			dst = append(dst, '}')
		}
		return append(dst, ']'), nil
	case TableJSONRows:
		dst = append(dst, `{"name":`...)
		dst = appendJSONString(dst, t.Name)
		dst = appendJSONSchema(dst, t, false)
		dst = append(dst, `,"rows":[`...)
		for r := 0; r < t.Rows; r++ {
			if r > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, '[')
			for j := range t.Columns {
				if j > 0 {
					dst = append(dst, ',')
				}
				if dst, e = appendJSONValue(dst, &t.Columns[j], r); e != nil {
					return nil, e
				}
			}
			dst = append(dst, ']')
		}
		return append(dst, "]}"...), nil
	case TableJSONColumns:
		dst = append(dst, `{"name":`...)
		dst = appendJSONString(dst, t.Name)
		dst = append(dst, `,"rows":`...)
		dst = strconv.AppendInt(dst, int64(t.Rows), 10)
		dst = append(dst, `,"columns":[`...)
		for j := range t.Columns {
			c := &t.Columns[j]
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"name":`...)
			dst = appendJSONString(dst, c.Name)
			dst = append(dst, `,"type":"`...)
			dst = append(dst, c.TypeName()...)
			dst = append(dst, `","values":[`...)
			for r := 0; r < t.Rows; r++ {
				if r > 0 {
					dst = append(dst, ',')
				}
				if dst, e = appendJSONValue(dst, c, r); e != nil {
					return nil, e
				}
			}
			dst = append(dst, "]}"...)
		}
		return append(dst, "]}"...), nil
	}
	return nil, newError(InvalidField, "format", -1, "not a JSON table layout: "+layout.String())
}

func appendJSONSchema(dst []byte, t *Table, _ bool) []byte {
	dst = append(dst, `,"columns":[`...)
	for j := range t.Columns {
		if j > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"name":`...)
		dst = appendJSONString(dst, t.Columns[j].Name)
		dst = append(dst, `,"type":"`...)
		dst = append(dst, t.Columns[j].TypeName()...)
		dst = append(dst, `"}`...)
	}
	return append(dst, ']')
}
