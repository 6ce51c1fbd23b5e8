package densewire

import (
	"encoding/binary"
	"strconv"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// Columnar Protobuf tables (SPEC.md section 15.6), message densewire.v1.Table of
// proto/densewire/v1/table.proto, read and written on the wire format with protowire like the
// tensor messages (protobuf.go): plain columns alias the body, byte-stream-split ones are joined
// into a fresh buffer, and errors carry the spec's offsets and fields. The generated types are in
// densewirepb (Table, Column).

// ColumnEncoding is the layout of a fixed-width column's data in a Protobuf table.
type ColumnEncoding uint8

// The column encodings of table.proto.
const (
	EncodingPlain           ColumnEncoding = 0 // value after value, little-endian
	EncodingByteStreamSplit ColumnEncoding = 1 // Parquet's BYTE_STREAM_SPLIT: byte k of item i at data[k*m+i]
)

const (
	pbTableName    protowire.Number = 1
	pbTableRows    protowire.Number = 2
	pbTableColumns protowire.Number = 3
	pbColName      protowire.Number = 1
	pbColType      protowire.Number = 2
	pbColDims      protowire.Number = 3
	pbColEncoding  protowire.Number = 4
	pbColData      protowire.Number = 5
	pbColLengths   protowire.Number = 6
)

// DecodeTableProtobuf decodes a densewire.v1.Table body (SPEC.md section 15.6). Plain fixed-width
// columns alias body; byte-stream-split ones are copied into a new (aligned) buffer; strings are
// one allocation for the whole column. Errors: the wire-format errors of DecodeProtobuf (Malformed
// at the tag, Truncated at len(body)); on columns[COL]: type absent or 0 InvalidField on .type, an
// unknown enum value UnknownDType on .type; dimensions 0 on a vector or set on another type
// InvalidField on .dimensions; an unknown encoding or byte-stream-split on bool or string
// InvalidField on .encoding; data of the wrong length LengthMismatch on .data (offset
// min(actual, expected)); lengths with other than rows entries ShapeMismatch on .lengths, or whose
// sum is not len(data) LengthMismatch on .data; invalid UTF-8 Malformed on .data; a bool byte
// other than 0 or 1 InvalidField on .data[ROW].
func DecodeTableProtobuf(body []byte) (*Table, error) {
	return asError(decodeTableProtobuf(body))
}

type pbColumn struct {
	name     []byte
	typ      uint64
	hasType  bool
	dims     uint64
	encoding uint64
	data     []byte
	dataOff  int
	lengths  []uint64
	hasLens  bool
}

func decodeTableProtobuf(body []byte) (*Table, *Error) {
	p := pbParser{body: body}
	var (
		name []byte
		rows uint64
		cols []pbColumn
	)
	b, base := body, 0
	for len(b) > 0 {
		tagOff := base
		num, typ, n := consumeTag(b)
		if n < 0 {
			return nil, p.wireError(n, tagOff, tagOff, true, "invalid tag")
		}
		b, base = b[n:], base+n
		switch {
		case num == pbTableRows && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return nil, p.wireError(n, base, tagOff, true, "invalid varint")
			}
			rows = v
			b, base = b[n:], base+n
		case (num == pbTableName || num == pbTableColumns) && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return nil, p.wireError(n, lengthErrOff(n, tagOff, base), tagOff, true, "invalid length")
			}
			vOff := base + n - len(v)
			if num == pbTableName {
				if !utf8.Valid(v) { // a string field: invalid UTF-8 is a parse error, as for the official parsers
					return nil, newError(Malformed, "name", tagOff, "the table name at offset "+strconv.Itoa(tagOff)+" is not UTF-8")
				}
				name = v
			} else {
				var c pbColumn
				if e := p.column(v, vOff, &c); e != nil {
					return nil, e
				}
				cols = append(cols, c)
			}
			b, base = b[n:], base+n
		case num >= pbTableName && num <= pbTableColumns:
			return nil, p.wrongType(num, typ, tagOff)
		default:
			m := protowire.ConsumeFieldValue(num, typ, b)
			if m < 0 {
				return nil, p.wireError(m, tagOff, tagOff, true, "invalid field value")
			}
			b, base = b[m:], base+m
		}
	}
	if rows > uint64(maxInt) {
		return nil, newError(InvalidField, "rows", -1, "rows "+strconv.FormatUint(rows, 10)+" is out of range")
	}
	t := &Table{Name: string(name), Rows: int(rows), Columns: make([]Column, len(cols))}
	seen := make(map[string]bool, len(cols))
	for i := range cols {
		if e := cols[i].build(&t.Columns[i], i, int(rows), seen); e != nil {
			return nil, e
		}
	}
	return t, nil
}

// column parses the fields of a Column message held in b, at offset base of the body.
func (p *pbParser) column(b []byte, base int, c *pbColumn) *Error {
	for len(b) > 0 {
		tagOff := base
		num, typ, n := consumeTag(b)
		if n < 0 {
			return p.wireError(n, tagOff, tagOff, false, "invalid tag")
		}
		b, base = b[n:], base+n
		switch {
		case (num == pbColType || num == pbColDims || num == pbColEncoding || num == pbColLengths) && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return p.wireError(n, base, tagOff, false, "invalid varint")
			}
			switch num {
			case pbColType:
				c.typ, c.hasType = v, true
			case pbColDims:
				c.dims = v
			case pbColEncoding:
				c.encoding = v
			default:
				c.lengths, c.hasLens = append(c.lengths, v), true
			}
			b, base = b[n:], base+n
		case (num == pbColName || num == pbColData || num == pbColLengths) && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return p.wireError(n, lengthErrOff(n, tagOff, base), tagOff, false, "invalid length")
			}
			vOff := base + n - len(v)
			switch num {
			case pbColName:
				if !utf8.Valid(v) {
					return newError(Malformed, "name", tagOff, "a column name at offset "+strconv.Itoa(tagOff)+" is not UTF-8")
				}
				c.name = v
			case pbColData:
				c.data, c.dataOff = v, vOff
			default:
				c.hasLens = true
				if c.lengths == nil {
					c.lengths = make([]uint64, 0, len(v))
				}
				for len(v) > 0 {
					x, m := protowire.ConsumeVarint(v)
					if m < 0 {
						return newError(Malformed, "lengths", tagOff, "invalid varint at offset "+strconv.Itoa(vOff)+
							" in the packed lengths at offset "+strconv.Itoa(tagOff))
					}
					c.lengths = append(c.lengths, x)
					v, vOff = v[m:], vOff+m
				}
			}
			b, base = b[n:], base+n
		case num >= pbColName && num <= pbColLengths:
			return p.wrongType(num, typ, tagOff)
		default:
			m := protowire.ConsumeFieldValue(num, typ, b)
			if m < 0 {
				return p.wireError(m, tagOff, tagOff, false, "invalid field value")
			}
			b, base = b[m:], base+m
		}
	}
	return nil
}

// checkColumnName: names are non-empty UTF-8, unique within the table.
func checkColumnName(name []byte, field string, seen map[string]bool) *Error {
	if len(name) == 0 {
		return newError(InvalidField, field+".name", -1, field+" has no name")
	}
	if !utf8.Valid(name) {
		return newError(Malformed, field+".name", -1, field+".name is not UTF-8")
	}
	if seen[string(name)] {
		return newError(InvalidField, field+".name", -1, field+": column "+strconv.Quote(string(name))+" appears twice")
	}
	seen[string(name)] = true
	return nil
}

func (pc *pbColumn) build(c *Column, i, n int, seen map[string]bool) *Error {
	field := "columns[" + strconv.Itoa(i) + "]"
	if e := checkColumnName(pc.name, field, seen); e != nil {
		return e
	}
	c.Name = string(pc.name)
	// enums are int32 on the wire: official parsers keep the low 32 bits, and so does this one
	typ := int32(uint32(pc.typ))
	if !pc.hasType || typ == 0 {
		return newError(InvalidField, field+".type", -1, field+".type is missing (absent or 0)")
	}
	if typ < int32(ColumnBool) || typ > int32(ColumnFloat32Vector) {
		return newError(UnknownDType, field+".type", -1, field+".type: unknown column type enum value "+strconv.Itoa(int(typ)))
	}
	c.Type = ColumnType(typ)
	dims := uint32(pc.dims)
	if c.Type == ColumnFloat32Vector {
		if dims == 0 || dims > maxVectorDims {
			return newError(InvalidField, field+".dimensions", -1, field+".dimensions "+strconv.Itoa(int(dims))+" is out of range for float32[d]")
		}
		c.Dimensions = int(dims)
	} else if dims != 0 {
		return newError(InvalidField, field+".dimensions", -1, field+".dimensions is set on a "+c.Type.String()+" column")
	}
	enc := int32(uint32(pc.encoding))
	if enc != int32(EncodingPlain) && enc != int32(EncodingByteStreamSplit) {
		return newError(InvalidField, field+".encoding", -1, field+".encoding: unknown column encoding "+strconv.Itoa(int(enc)))
	}
	if enc == int32(EncodingByteStreamSplit) && (c.Type == ColumnBool || c.Type == ColumnString) {
		return newError(InvalidField, field+".encoding", -1, field+".encoding: byte-stream-split is not allowed on "+c.Type.String())
	}
	if c.Type == ColumnString {
		strs, e := splitStrings(pc.data, pc.lengths, n, field, pc.dataOff)
		if e != nil {
			return e
		}
		c.Strings = strs
		return nil
	}
	if pc.hasLens && len(pc.lengths) > 0 {
		return newError(InvalidField, field+".lengths", -1, field+".lengths is set on a "+c.Type.String()+" column")
	}
	data, e := fixedData(pc.data, n, c.ColumnSpec, field+".data")
	if e != nil {
		return e
	}
	if enc == int32(EncodingByteStreamSplit) {
		out := make([]byte, len(data))
		joinByteStreams(out, data, c.itemWidth())
		data = out
	}
	c.Data = data
	if c.Type == ColumnBool {
		return checkBools(data, field+".data")
	}
	return nil
}

// fixedData checks that data holds n values of the column's width.
func fixedData(data []byte, n int, spec ColumnSpec, field string) ([]byte, *Error) {
	w := spec.Width()
	if n > 0 && w > maxInt/n {
		return nil, newError(LengthMismatch, field, len(data), field+": "+strconv.Itoa(n)+" rows of "+spec.TypeName()+" cannot be held")
	}
	if len(data) != n*w {
		e := lengthMismatch(field, len(data), n*w)
		e.Message = field + ": " + e.Message + " (" + strconv.Itoa(n) + " rows of " + spec.TypeName() + ")"
		return nil, e
	}
	return data, nil
}

func checkBools(data []byte, field string) *Error {
	for r, b := range data {
		if b > 1 {
			f := field + "[" + strconv.Itoa(r) + "]"
			return newError(InvalidField, f, -1, f+": bool byte "+strconv.Itoa(int(b))+" (want 0 or 1)")
		}
	}
	return nil
}

// splitStrings cuts the concatenated UTF-8 of n strings by their lengths, in one allocation.
func splitStrings(data []byte, lengths []uint64, n int, field string, dataOff int) ([]string, *Error) {
	if len(lengths) != n {
		return nil, newError(ShapeMismatch, field+".lengths", -1, field+".lengths has "+strconv.Itoa(len(lengths))+" entries for "+strconv.Itoa(n)+" rows")
	}
	sum := uint64(0)
	for _, l := range lengths {
		l = uint64(uint32(l)) // uint32 on the wire: the low 32 bits, as official parsers
		sum += l
		if sum > uint64(len(data)) {
			break
		}
	}
	if sum != uint64(len(data)) {
		e := lengthMismatch(field+".data", len(data), int(min(sum, uint64(len(data))+1)))
		e.Message = field + ".data: the lengths add up to " + strconv.FormatUint(sum, 10) + " bytes, data has " + strconv.Itoa(len(data))
		if sum > uint64(len(data)) {
			e.Message = field + ".data: the lengths add up to more than the " + strconv.Itoa(len(data)) + " bytes of data"
		}
		return nil, e
	}
	if !utf8.Valid(data) {
		return nil, newError(Malformed, field+".data", dataOff, field+".data is not valid UTF-8")
	}
	all := string(data)
	out := make([]string, n)
	off := 0
	for i, l := range lengths {
		end := off + int(uint32(l))
		// valid as a whole; a value is valid too unless it starts inside a character
		if off < len(all) && l != 0 && !utf8.RuneStart(all[off]) || end < len(all) && !utf8.RuneStart(all[end]) {
			return nil, newError(Malformed, field+".data", dataOff+off, field+".data: value "+strconv.Itoa(i)+" is not valid UTF-8")
		}
		out[i] = all[off:end]
		off = end
	}
	return out, nil
}

// joinByteStreams undoes byte-stream-split: src holds w streams of m = len(src)/w bytes, byte k of
// item i at src[k*m+i]; dst gets the items one after another. Widths 4, 8 and 16 (int32, float32,
// vectors; int64, float64; uuid) go eight items at a time through an 8x8 byte transpose in
// registers (Go does not vectorise loops; this is about 5x the byte-by-byte loop).
func joinByteStreams(dst, src []byte, w int) {
	m := len(src) / w
	i := 0
	switch w {
	case 4:
		s0, s1, s2, s3 := src[:m], src[m:2*m], src[2*m:3*m], src[3*m:4*m]
		for ; i+8 <= m; i += 8 {
			y0, y1, y2, y3, y4, y5, y6, y7 := transpose8x8(le64(s0[i:]), le64(s1[i:]), le64(s2[i:]), le64(s3[i:]), 0, 0, 0, 0)
			d := dst[4*i : 4*i+32]
			binary.LittleEndian.PutUint64(d[0:], y0|y1<<32)
			binary.LittleEndian.PutUint64(d[8:], y2|y3<<32)
			binary.LittleEndian.PutUint64(d[16:], y4|y5<<32)
			binary.LittleEndian.PutUint64(d[24:], y6|y7<<32)
		}
	case 8, 16:
		for half := 0; half < w; half += 8 {
			s := src[half*m:]
			s0, s1, s2, s3 := s[:m], s[m:2*m], s[2*m:3*m], s[3*m:4*m]
			s4, s5, s6, s7 := s[4*m:5*m], s[5*m:6*m], s[6*m:7*m], s[7*m:8*m]
			for i = 0; i+8 <= m; i += 8 {
				y0, y1, y2, y3, y4, y5, y6, y7 := transpose8x8(le64(s0[i:]), le64(s1[i:]), le64(s2[i:]), le64(s3[i:]),
					le64(s4[i:]), le64(s5[i:]), le64(s6[i:]), le64(s7[i:]))
				d := dst[i*w+half : (i+7)*w+half+8]
				binary.LittleEndian.PutUint64(d[0:], y0)
				binary.LittleEndian.PutUint64(d[w:], y1)
				binary.LittleEndian.PutUint64(d[2*w:], y2)
				binary.LittleEndian.PutUint64(d[3*w:], y3)
				binary.LittleEndian.PutUint64(d[4*w:], y4)
				binary.LittleEndian.PutUint64(d[5*w:], y5)
				binary.LittleEndian.PutUint64(d[6*w:], y6)
				binary.LittleEndian.PutUint64(d[7*w:], y7)
			}
		}
	}
	// the rest (and other widths) byte by byte
	for k := 0; k < w; k++ {
		for j, b := range src[k*m+i : (k+1)*m] {
			dst[(i+j)*w+k] = b
		}
	}
}

// swapBlocks exchanges the off-diagonal blocks of two rows of an 8x8 byte matrix.
func swapBlocks(a, b uint64, shift uint, mask uint64) (uint64, uint64) {
	return a&mask | (b&mask)<<shift, (a>>shift)&mask | b&^mask
}

// transpose8x8 transposes the 8x8 byte matrix whose row r is word xr (byte c of a word is its c-th
// least significant byte): byte c of word r becomes byte r of word c.
func transpose8x8(x0, x1, x2, x3, x4, x5, x6, x7 uint64) (uint64, uint64, uint64, uint64, uint64, uint64, uint64, uint64) {
	const m4, m2, m1 = 0x00000000FFFFFFFF, 0x0000FFFF0000FFFF, 0x00FF00FF00FF00FF
	x0, x4 = swapBlocks(x0, x4, 32, m4)
	x1, x5 = swapBlocks(x1, x5, 32, m4)
	x2, x6 = swapBlocks(x2, x6, 32, m4)
	x3, x7 = swapBlocks(x3, x7, 32, m4)
	x0, x2 = swapBlocks(x0, x2, 16, m2)
	x1, x3 = swapBlocks(x1, x3, 16, m2)
	x4, x6 = swapBlocks(x4, x6, 16, m2)
	x5, x7 = swapBlocks(x5, x7, 16, m2)
	x0, x1 = swapBlocks(x0, x1, 8, m1)
	x2, x3 = swapBlocks(x2, x3, 8, m1)
	x4, x5 = swapBlocks(x4, x5, 8, m1)
	x6, x7 = swapBlocks(x6, x7, 8, m1)
	return x0, x1, x2, x3, x4, x5, x6, x7
}

// splitByteStreams is the inverse of joinByteStreams.
func splitByteStreams(dst, src []byte, w int) {
	m := len(src) / w
	for i := 0; i < m; i++ {
		item := src[i*w : i*w+w]
		for k, b := range item {
			dst[k*m+i] = b
		}
	}
}

// EncodeTableProtobuf writes the table as a densewire.v1.Table body: fields in number order,
// proto3 defaults omitted (byte-exact with the official serializers). With
// EncodingByteStreamSplit every fixed-width column of width >= 2 is split, bool stays plain.
func EncodeTableProtobuf(t *Table, enc ColumnEncoding) ([]byte, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	if enc != EncodingPlain && enc != EncodingByteStreamSplit {
		return nil, newError(InvalidField, "encoding", -1, "unknown column encoding "+strconv.Itoa(int(enc)))
	}
	size := 32 + len(t.Name)
	for i := range t.Columns {
		size += pbColumnSize(&t.Columns[i], enc) + 16
	}
	dst := make([]byte, 0, size)
	if t.Name != "" {
		dst = protowire.AppendTag(dst, pbTableName, protowire.BytesType)
		dst = protowire.AppendString(dst, t.Name)
	}
	if t.Rows != 0 {
		dst = protowire.AppendTag(dst, pbTableRows, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(t.Rows))
	}
	for i := range t.Columns {
		c := &t.Columns[i]
		dst = protowire.AppendTag(dst, pbTableColumns, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(pbColumnSize(c, enc)))
		dst = protowire.AppendTag(dst, pbColName, protowire.BytesType)
		dst = protowire.AppendString(dst, c.Name)
		dst = protowire.AppendTag(dst, pbColType, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(c.Type))
		if c.Type == ColumnFloat32Vector {
			dst = protowire.AppendTag(dst, pbColDims, protowire.VarintType)
			dst = protowire.AppendVarint(dst, uint64(c.Dimensions))
		}
		split := columnSplit(c, enc)
		if split {
			dst = protowire.AppendTag(dst, pbColEncoding, protowire.VarintType)
			dst = protowire.AppendVarint(dst, uint64(EncodingByteStreamSplit))
		}
		if c.Type == ColumnString {
			total := 0
			for _, s := range c.Strings {
				total += len(s)
			}
			if total > 0 {
				dst = protowire.AppendTag(dst, pbColData, protowire.BytesType)
				dst = protowire.AppendVarint(dst, uint64(total))
				for _, s := range c.Strings {
					dst = append(dst, s...)
				}
			}
			if len(c.Strings) > 0 {
				dst = protowire.AppendTag(dst, pbColLengths, protowire.BytesType)
				dst = protowire.AppendVarint(dst, uint64(packedLengthsSize(c.Strings)))
				for _, s := range c.Strings {
					dst = protowire.AppendVarint(dst, uint64(len(s)))
				}
			}
			continue
		}
		if len(c.Data) > 0 {
			dst = protowire.AppendTag(dst, pbColData, protowire.BytesType)
			dst = protowire.AppendVarint(dst, uint64(len(c.Data)))
			if split {
				start := len(dst)
				dst = append(dst, make([]byte, len(c.Data))...)
				splitByteStreams(dst[start:], c.Data, c.itemWidth())
			} else {
				dst = append(dst, c.Data...)
			}
		}
	}
	return dst, nil
}

func columnSplit(c *Column, enc ColumnEncoding) bool {
	return enc == EncodingByteStreamSplit && c.Type != ColumnBool && c.Type != ColumnString
}

func packedLengthsSize(strs []string) int {
	n := 0
	for _, s := range strs {
		n += protowire.SizeVarint(uint64(len(s)))
	}
	return n
}

func pbColumnSize(c *Column, enc ColumnEncoding) int {
	size := 1 + protowire.SizeBytes(len(c.Name)) + 1 + protowire.SizeVarint(uint64(c.Type))
	if c.Type == ColumnFloat32Vector {
		size += 1 + protowire.SizeVarint(uint64(c.Dimensions))
	}
	if columnSplit(c, enc) {
		size += 2
	}
	if c.Type == ColumnString {
		total := 0
		for _, s := range c.Strings {
			total += len(s)
		}
		if total > 0 {
			size += 1 + protowire.SizeBytes(total)
		}
		if len(c.Strings) > 0 {
			size += 1 + protowire.SizeBytes(packedLengthsSize(c.Strings))
		}
	} else if len(c.Data) > 0 {
		size += 1 + protowire.SizeBytes(len(c.Data))
	}
	return size
}
