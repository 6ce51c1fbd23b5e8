package arrowipc

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	densewire "github.com/densewire/densewire/go"
)

// Tables as Arrow IPC streams (SPEC.md section 15.7).

func init() { densewire.RegisterArrowTable(EncodeTable, DecodeTable) }

// Metadata keys of SPEC.md section 15.7.
const (
	KeyTable         = "densewire.table"
	KeyType          = "densewire.type"
	KeyExtensionName = "ARROW:extension:name"
	KeyExtensionMeta = "ARROW:extension:metadata"
	UUIDExtension    = "arrow.uuid"
)

func columnArrowType(s densewire.ColumnSpec) arrow.DataType {
	switch s.Type {
	case densewire.ColumnBool:
		return arrow.FixedWidthTypes.Boolean
	case densewire.ColumnInt32:
		return arrow.PrimitiveTypes.Int32
	case densewire.ColumnInt64:
		return arrow.PrimitiveTypes.Int64
	case densewire.ColumnFloat32:
		return arrow.PrimitiveTypes.Float32
	case densewire.ColumnFloat64:
		return arrow.PrimitiveTypes.Float64
	case densewire.ColumnString:
		return arrow.BinaryTypes.String
	case densewire.ColumnUUID:
		return &arrow.FixedSizeBinaryType{ByteWidth: 16}
	case densewire.ColumnFloat32Vector:
		return arrow.FixedSizeListOfField(int32(s.Dimensions), arrow.Field{Name: "item", Type: arrow.PrimitiveTypes.Float32, Nullable: false})
	}
	return nil
}

// DecodeTable reads a table from an Arrow IPC stream written by any Arrow implementation. Each
// column's type comes from its densewire.type metadata, or when that is absent from the Arrow
// type (Bool, Int32, Int64, Float32, Float64, Utf8/LargeUtf8, FixedSizeBinary(16) as uuid,
// FixedSizeList<Float32, d>); the name from the schema's densewire.table. Record batches are
// concatenated. Errors: a stream that ends before its first record batch: Truncated; one that
// cannot be read: Malformed; an unknown densewire.type: UnknownDType on the column's name; an
// Arrow type that does not match it, or nulls: InvalidField on the column's name.
func DecodeTable(body []byte) (t *densewire.Table, err error) {
	defer func() {
		if p := recover(); p != nil {
			t, err = nil, fail(densewire.Malformed, "", fmt.Sprint("invalid Arrow stream: ", p))
		}
	}()
	schema, batches, release, e := readStream(body)
	if e != nil {
		return nil, e
	}
	defer release()
	t = &densewire.Table{Columns: make([]densewire.Column, schema.NumFields())}
	if md := schema.Metadata(); md.FindKey(KeyTable) >= 0 {
		t.Name = md.Values()[md.FindKey(KeyTable)]
	}
	for _, b := range batches {
		if b.NumRows() < 0 || b.NumRows() > int64(math.MaxInt32) {
			return nil, fail(densewire.Malformed, "", "a record batch of "+strconv.FormatInt(b.NumRows(), 10)+" rows")
		}
		t.Rows += int(b.NumRows())
	}
	seen := map[string]bool{}
	for i, field := range schema.Fields() {
		spec, e := fieldSpec(field)
		if e != nil {
			return nil, e
		}
		if spec.Name == "" || seen[spec.Name] {
			return nil, fail(densewire.InvalidField, "columns["+strconv.Itoa(i)+"].name", "column "+strconv.Itoa(i)+": column names must be non-empty and unique")
		}
		seen[spec.Name] = true
		c := &t.Columns[i]
		c.ColumnSpec = spec
		// capacity from the declared rows, but never more than the body can hold
		if spec.Type == densewire.ColumnString {
			c.Strings = make([]string, 0, min(t.Rows, len(body)))
		} else {
			c.Data = make([]byte, 0, min(t.Rows, len(body))*min(spec.Width(), len(body)))
		}
		for _, b := range batches {
			col := b.Column(i)
			if int64(col.Len()) != b.NumRows() {
				return nil, fail(densewire.Malformed, spec.Name, "column "+strconv.Quote(spec.Name)+" has "+strconv.Itoa(col.Len())+
					" values in a batch of "+strconv.FormatInt(b.NumRows(), 10)+" rows")
			}
			if ext, ok := col.(array.ExtensionArray); ok {
				col = ext.Storage()
			}
			if col.NullN() > 0 {
				return nil, fail(densewire.InvalidField, spec.Name, "column "+strconv.Quote(spec.Name)+" has nulls")
			}
			if e := appendValues(c, col); e != nil {
				return nil, e
			}
		}
	}
	return t, nil
}

func storageType(dt arrow.DataType) arrow.DataType {
	if ext, ok := dt.(arrow.ExtensionType); ok {
		return ext.StorageType()
	}
	return dt
}

// fieldSpec works out a column's spec from its metadata and Arrow type, and checks they agree.
func fieldSpec(field arrow.Field) (densewire.ColumnSpec, *densewire.Error) {
	spec := densewire.ColumnSpec{Name: field.Name}
	typ := storageType(field.Type)
	if i := field.Metadata.FindKey(KeyType); i >= 0 {
		t, d, err := densewire.ParseColumnType(field.Metadata.Values()[i])
		if err != nil {
			e := err.(*densewire.Error)
			e.Field = field.Name
			e.Message = "column " + strconv.Quote(field.Name) + ": " + e.Message
			return spec, e
		}
		spec.Type, spec.Dimensions = t, d
		want := columnArrowType(spec)
		ok := arrow.TypeEqual(typ, want)
		if t == densewire.ColumnString && typ.ID() == arrow.LARGE_STRING {
			ok = true
		}
		if !ok {
			return spec, fail(densewire.InvalidField, field.Name, "column "+strconv.Quote(field.Name)+" is Arrow "+typ.String()+
				", which does not carry "+spec.TypeName())
		}
		return spec, nil
	}
	switch typ.ID() {
	case arrow.BOOL:
		spec.Type = densewire.ColumnBool
	case arrow.INT32:
		spec.Type = densewire.ColumnInt32
	case arrow.INT64:
		spec.Type = densewire.ColumnInt64
	case arrow.FLOAT32:
		spec.Type = densewire.ColumnFloat32
	case arrow.FLOAT64:
		spec.Type = densewire.ColumnFloat64
	case arrow.STRING, arrow.LARGE_STRING:
		spec.Type = densewire.ColumnString
	case arrow.FIXED_SIZE_BINARY:
		if typ.(*arrow.FixedSizeBinaryType).ByteWidth == 16 {
			spec.Type = densewire.ColumnUUID
		}
	case arrow.FIXED_SIZE_LIST:
		l := typ.(*arrow.FixedSizeListType)
		if l.Elem().ID() == arrow.FLOAT32 && l.Len() >= 1 {
			spec.Type, spec.Dimensions = densewire.ColumnFloat32Vector, int(l.Len())
		}
	}
	if spec.Type == 0 {
		return spec, fail(densewire.InvalidField, field.Name, "column "+strconv.Quote(field.Name)+" has no "+KeyType+
			" and its Arrow type "+typ.String()+" is not one of densewire's")
	}
	return spec, nil
}

// appendValues appends one batch's values of the column.
func appendValues(c *densewire.Column, col arrow.Array) *densewire.Error {
	bad := func(what string) *densewire.Error {
		return fail(densewire.Malformed, c.Name, "column "+strconv.Quote(c.Name)+": "+what)
	}
	n := col.Len()
	switch a := col.(type) {
	case *array.Boolean:
		for i := 0; i < n; i++ {
			v := byte(0)
			if a.Value(i) {
				v = 1
			}
			c.Data = append(c.Data, v)
		}
	case *array.Int32:
		c.Data = append(c.Data, arrow.Int32Traits.CastToBytes(a.Int32Values())...)
	case *array.Int64:
		c.Data = append(c.Data, arrow.Int64Traits.CastToBytes(a.Int64Values())...)
	case *array.Float32:
		c.Data = append(c.Data, arrow.Float32Traits.CastToBytes(a.Float32Values())...)
	case *array.Float64:
		c.Data = append(c.Data, arrow.Float64Traits.CastToBytes(a.Float64Values())...)
	case *array.String:
		offs := a.ValueOffsets()
		if len(offs) < n+1 {
			return bad("offsets shorter than the column")
		}
		all := string(a.ValueBytes())
		base := int(offs[0])
		for i := 0; i < n; i++ {
			s, e := int(offs[i])-base, int(offs[i+1])-base
			if s < 0 || e < s || e > len(all) {
				return bad("string offsets out of range")
			}
			c.Strings = append(c.Strings, all[s:e])
		}
	case *array.LargeString:
		offs := a.ValueOffsets()
		if len(offs) < n+1 {
			return bad("offsets shorter than the column")
		}
		all := string(a.ValueBytes())
		base := offs[0]
		for i := 0; i < n; i++ {
			s, e := offs[i]-base, offs[i+1]-base
			if s < 0 || e < s || e > int64(len(all)) {
				return bad("string offsets out of range")
			}
			c.Strings = append(c.Strings, all[s:e])
		}
	case *array.FixedSizeBinary:
		for i := 0; i < n; i++ {
			v := a.Value(i)
			if len(v) != 16 {
				return bad("value buffer shorter than the column")
			}
			c.Data = append(c.Data, v...)
		}
	case *array.FixedSizeList:
		if n == 0 {
			return nil
		}
		child, ok := a.ListValues().(*array.Float32)
		if !ok {
			return bad("vector items are not float32")
		}
		start, _ := a.ValueOffsets(0)
		_, end := a.ValueOffsets(n - 1)
		vals := child.Float32Values()
		if start < 0 || end < start || end > int64(len(vals)) || end-start != int64(n*c.Dimensions) {
			return bad("value buffer shorter than the column")
		}
		if child.NullN() > 0 {
			for i := start; i < end; i++ {
				if child.IsNull(int(i)) {
					return fail(densewire.InvalidField, c.Name, "column "+strconv.Quote(c.Name)+" has null vector items")
				}
			}
		}
		c.Data = append(c.Data, arrow.Float32Traits.CastToBytes(vals[start:end])...)
	default:
		return fail(densewire.InvalidField, c.Name, "unexpected Arrow array "+col.DataType().String())
	}
	if c.Type == densewire.ColumnString {
		for _, s := range c.Strings[len(c.Strings)-n:] {
			if !validUTF8(s) {
				return bad("a value is not UTF-8")
			}
		}
	}
	return nil
}

// EncodeTable writes the table as an Arrow IPC stream: one schema (densewire.version,
// densewire.table; densewire.type on every field, arrow.uuid on uuid fields), one record batch,
// the end-of-stream marker. Fixed-width column data is handed to the writer without a copy.
func EncodeTable(t *densewire.Table) ([]byte, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	fields := make([]arrow.Field, len(t.Columns))
	cols := make([]arrow.Array, len(t.Columns))
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	n := t.Rows
	for i := range t.Columns {
		c := &t.Columns[i]
		typ := columnArrowType(c.ColumnSpec)
		keys, vals := []string{KeyType}, []string{c.TypeName()}
		if c.Type == densewire.ColumnUUID {
			keys = append(keys, KeyExtensionName, KeyExtensionMeta)
			vals = append(vals, UUIDExtension, "")
		}
		fields[i] = arrow.Field{Name: c.Name, Type: typ, Nullable: false, Metadata: arrow.NewMetadata(keys, vals)}
		var data arrow.ArrayData
		switch c.Type {
		case densewire.ColumnBool:
			bits := make([]byte, (n+7)/8)
			for r, b := range c.Data {
				if b != 0 {
					bits[r/8] |= 1 << (r % 8)
				}
			}
			data = array.NewData(typ, n, []*memory.Buffer{nil, memory.NewBufferBytes(bits)}, nil, 0, 0)
		case densewire.ColumnString:
			total := 0
			for _, s := range c.Strings {
				total += len(s)
			}
			if total > math.MaxInt32 {
				return nil, &densewire.Error{Category: densewire.InvalidField, Field: c.Name, Offset: -1, Message: "column " + c.Name + " holds more than 2^31-1 bytes of text"}
			}
			offs := make([]int32, n+1)
			buf := make([]byte, 0, total)
			for r, s := range c.Strings {
				buf = append(buf, s...)
				offs[r+1] = int32(len(buf))
			}
			data = array.NewData(typ, n, []*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(offs)),
				memory.NewBufferBytes(buf)}, nil, 0, 0)
		case densewire.ColumnFloat32Vector:
			child := array.NewData(arrow.PrimitiveTypes.Float32, n*c.Dimensions, []*memory.Buffer{nil, memory.NewBufferBytes(c.Data)}, nil, 0, 0)
			data = array.NewData(typ, n, []*memory.Buffer{nil}, []arrow.ArrayData{child}, 0, 0)
			child.Release()
		default:
			data = array.NewData(typ, n, []*memory.Buffer{nil, memory.NewBufferBytes(c.Data)}, nil, 0, 0)
		}
		cols[i] = array.MakeFromData(data)
		data.Release()
	}
	md := arrow.NewMetadata([]string{KeyVersion, KeyTable}, []string{"1", t.Name})
	schema := arrow.NewSchema(fields, &md)
	rec := array.NewRecordBatch(schema, cols, int64(n))
	defer rec.Release()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(schema))
	if err := w.Write(rec); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func validUTF8(s string) bool { return utf8.ValidString(s) }
