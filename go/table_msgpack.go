package densewire

import (
	"strconv"
	"unicode/utf8"

	"github.com/tinylib/msgp/msgp"
)

// Columnar MessagePack tables (SPEC.md section 15.5): {"name": str, "rows": n, "columns": [{"name",
// "type", "data"}, ...]}, data a bin of n*width little-endian bytes or, for strings, an array of n
// str. Read in place with tinylib/msgp (fixed-width data aliases the body).

// DecodeTableMsgpack decodes a columnar MessagePack table. Keys may come in any order and unknown
// keys are skipped. Errors: the body is not a map, a key is not a str, or bytes follow the map:
// Malformed at the offset; the body ends early: Truncated at len(body); a missing or mistyped key:
// InvalidField on rows, columns, columns[COL].name, .type or .data; an unknown type: UnknownDType
// on columns[COL].type; a bin of the wrong length: LengthMismatch on columns[COL].data (offset
// min(actual, expected)); a string array of the wrong length: ShapeMismatch on columns[COL].data;
// a bool byte other than 0 or 1: InvalidField on columns[COL].data[ROW].
func DecodeTableMsgpack(body []byte) (*Table, error) {
	return asError(decodeTableMsgpack(body))
}

type mpColumn struct {
	name, typ        []byte
	hasName, hasType bool
	data             []byte // bin
	strs             []string
	isBin, isStrs    bool
	hasData          bool
	typOff, dataOff  int
	dataCount        uint32
}

func decodeTableMsgpack(body []byte) (*Table, *Error) {
	r := &mpReader{body: body, b: body}
	count, rest, err := msgp.ReadMapHeaderBytes(r.b)
	if err != nil {
		return nil, r.fail(err, 0, Malformed, "", "the body is not a MessagePack map")
	}
	r.b = rest
	var (
		name    string
		rows    uint64
		hasRows bool
		cols    []mpColumn
		hasCols bool
	)
	for i := uint32(0); i < count; i++ {
		keyOff := r.off()
		key, rest, err := msgp.ReadStringZC(r.b)
		if err != nil {
			return nil, r.fail(err, keyOff, Malformed, "", "map key is not a str")
		}
		r.b = rest
		valOff := r.off()
		switch string(key) {
		case "name":
			v, rest, err := msgp.ReadStringZC(r.b)
			if err != nil {
				return nil, r.fail(err, valOff, InvalidField, "name", "name is not a str")
			}
			if !utf8.Valid(v) {
				return nil, newError(Malformed, "name", valOff, "name is not UTF-8")
			}
			name, r.b = string(v), rest
		case "rows":
			v, rest, err := msgp.ReadUint64Bytes(r.b)
			if err != nil {
				return nil, r.fail(err, valOff, InvalidField, "rows", "rows is not a non-negative integer")
			}
			if v > uint64(maxInt) {
				return nil, newError(InvalidField, "rows", valOff, "rows "+strconv.FormatUint(v, 10)+" is out of range")
			}
			rows, hasRows, r.b = v, true, rest
		case "columns":
			n, rest, err := msgp.ReadArrayHeaderBytes(r.b)
			if err != nil {
				return nil, r.fail(err, valOff, InvalidField, "columns", "columns is not an array")
			}
			r.b = rest
			cols, hasCols = make([]mpColumn, 0, min(n, uint32(len(r.b)))), true
			for j := uint32(0); j < n; j++ {
				var c mpColumn
				if e := r.tableColumn(&c, "columns["+strconv.Itoa(int(j))+"]"); e != nil {
					return nil, e
				}
				cols = append(cols, c)
			}
		default:
			rest, err := msgp.Skip(r.b)
			if err != nil {
				return nil, r.fail(err, valOff, Malformed, "", "invalid MessagePack value")
			}
			r.b = rest
		}
	}
	if len(r.b) != 0 {
		return nil, newError(Malformed, "", r.off(), strconv.Itoa(len(r.b))+" bytes follow the map at offset "+strconv.Itoa(r.off()))
	}
	if !hasRows {
		return nil, newError(InvalidField, "rows", -1, "missing key rows")
	}
	if !hasCols {
		return nil, newError(InvalidField, "columns", -1, "missing key columns")
	}
	n := int(rows)
	t := &Table{Name: name, Rows: n, Columns: make([]Column, len(cols))}
	seen := make(map[string]bool, len(cols))
	for i := range cols {
		mc, c := &cols[i], &t.Columns[i]
		field := "columns[" + strconv.Itoa(i) + "]"
		if !mc.hasName {
			return nil, newError(InvalidField, field+".name", -1, "missing key "+field+".name")
		}
		if !mc.hasType {
			return nil, newError(InvalidField, field+".type", -1, "missing key "+field+".type")
		}
		if e := checkColumnName(mc.name, field, seen); e != nil {
			return nil, e
		}
		c.Name = string(mc.name)
		typ, d, err := ParseColumnType(string(mc.typ))
		if err != nil {
			e := err.(*Error)
			e.Field, e.Offset, e.Message = field+".type", mc.typOff, field+".type: "+e.Message
			return nil, e
		}
		c.Type, c.Dimensions = typ, d
		if !mc.hasData {
			return nil, newError(InvalidField, field+".data", -1, "missing key "+field+".data")
		}
		if typ == ColumnString {
			if !mc.isStrs {
				return nil, newError(InvalidField, field+".data", mc.dataOff, field+".data of a string column is not an array of str")
			}
			if len(mc.strs) != n {
				return nil, newError(ShapeMismatch, field+".data", mc.dataOff, field+".data has "+strconv.Itoa(len(mc.strs))+
					" strings for "+strconv.Itoa(n)+" rows")
			}
			c.Strings = mc.strs
			continue
		}
		if !mc.isBin {
			return nil, newError(InvalidField, field+".data", mc.dataOff, field+".data of a "+typ.String()+" column is not a bin")
		}
		data, e := fixedData(mc.data, n, c.ColumnSpec, field+".data")
		if e != nil {
			return nil, e
		}
		c.Data = data
		if typ == ColumnBool {
			if e := checkBools(data, field+".data"); e != nil {
				return nil, e
			}
		}
	}
	return t, nil
}

// tableColumn reads one column map {"name", "type", "data"}; unknown keys are skipped.
func (r *mpReader) tableColumn(c *mpColumn, field string) *Error {
	off := r.off()
	count, rest, err := msgp.ReadMapHeaderBytes(r.b)
	if err != nil {
		return r.fail(err, off, InvalidField, field, field+" is not a map")
	}
	r.b = rest
	for i := uint32(0); i < count; i++ {
		keyOff := r.off()
		key, rest, err := msgp.ReadStringZC(r.b)
		if err != nil {
			return r.fail(err, keyOff, Malformed, "", "map key is not a str")
		}
		r.b = rest
		valOff := r.off()
		switch string(key) {
		case "name", "type":
			v, rest, err := msgp.ReadStringZC(r.b)
			if err != nil {
				return r.fail(err, valOff, InvalidField, field+"."+string(key), field+"."+string(key)+" is not a str")
			}
			r.b = rest
			if string(key) == "name" {
				c.name, c.hasName = v, true
			} else {
				c.typ, c.hasType, c.typOff = v, true, valOff
			}
		case "data":
			c.hasData, c.dataOff = true, valOff
			c.isBin, c.isStrs, c.data, c.strs = false, false, nil, nil
			switch msgp.NextType(r.b) {
			case msgp.BinType:
				v, rest, err := msgp.ReadBytesZC(r.b)
				if err != nil {
					return r.fail(err, valOff, InvalidField, field+".data", field+".data is not a bin")
				}
				c.data, c.isBin, r.b = v, true, rest
			case msgp.ArrayType:
				n, rest, err := msgp.ReadArrayHeaderBytes(r.b)
				if err != nil {
					return r.fail(err, valOff, InvalidField, field+".data", field+".data is not an array")
				}
				r.b = rest
				// the values are copied into one string, then sliced: one allocation per column
				start := r.b
				total := 0
				for j := uint32(0); j < n; j++ {
					itemOff := r.off()
					v, rest, err := msgp.ReadStringZC(r.b)
					if err != nil {
						f := field + ".data[" + strconv.Itoa(int(j)) + "]"
						return r.fail(err, itemOff, InvalidField, f, f+" is not a str")
					}
					if !utf8.Valid(v) {
						f := field + ".data[" + strconv.Itoa(int(j)) + "]"
						return newError(Malformed, f, itemOff, f+" is not UTF-8")
					}
					total += len(v)
					r.b = rest
				}
				all := make([]byte, 0, total)
				b := start
				c.strs = make([]string, n)
				bounds := make([]int, n+1)
				for j := range n {
					v, rest, _ := msgp.ReadStringZC(b)
					all = append(all, v...)
					bounds[j+1] = len(all)
					b = rest
				}
				s := stringView(all)
				for j := range n {
					c.strs[j] = s[bounds[j]:bounds[j+1]]
				}
				c.isStrs = true
			default:
				rest, err := msgp.Skip(r.b)
				if err != nil {
					return r.fail(err, valOff, Malformed, "", "invalid MessagePack value")
				}
				r.b = rest
			}
		default:
			rest, err := msgp.Skip(r.b)
			if err != nil {
				return r.fail(err, valOff, Malformed, "", "invalid MessagePack value")
			}
			r.b = rest
		}
	}
	return nil
}

// EncodeTableMsgpack writes the table as columnar MessagePack, in the smallest encodings
// (byte-exact with the golden vectors).
func EncodeTableMsgpack(t *Table) ([]byte, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	size := 64 + len(t.Name)
	for i := range t.Columns {
		c := &t.Columns[i]
		size += 48 + len(c.Name) + len(c.Data)
		for _, s := range c.Strings {
			size += 5 + len(s)
		}
	}
	dst := make([]byte, 0, size)
	dst = msgp.AppendMapHeader(dst, 3)
	dst = msgp.AppendString(dst, "name")
	dst = msgp.AppendString(dst, t.Name)
	dst = msgp.AppendString(dst, "rows")
	dst = msgp.AppendUint64(dst, uint64(t.Rows))
	dst = msgp.AppendString(dst, "columns")
	dst = msgp.AppendArrayHeader(dst, uint32(len(t.Columns)))
	for i := range t.Columns {
		c := &t.Columns[i]
		dst = msgp.AppendMapHeader(dst, 3)
		dst = msgp.AppendString(dst, "name")
		dst = msgp.AppendString(dst, c.Name)
		dst = msgp.AppendString(dst, "type")
		dst = msgp.AppendString(dst, c.TypeName())
		dst = msgp.AppendString(dst, "data")
		if c.Type == ColumnString {
			dst = msgp.AppendArrayHeader(dst, uint32(len(c.Strings)))
			for _, s := range c.Strings {
				dst = msgp.AppendString(dst, s)
			}
		} else {
			dst = msgp.AppendBytes(dst, c.Data)
		}
	}
	return dst, nil
}
