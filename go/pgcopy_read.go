package densewire

import (
	"encoding/binary"
	"slices"
	"strconv"
	"unicode/utf8"
)

// DecodeCopy reads a whole binary COPY stream (as COPY ... TO STDOUT (FORMAT BINARY) sends it) of
// the columns cols (an optional id column, then the vector column) into one (n, d) tensor of the
// vector type's dtype (PgType.DType: float32, float16, binary; a sparsevec scattered into zeros)
// and the ids. The tensor owns its data (little-endian, every row byte-swapped from the stream in
// one pass). Errors are those of SPEC.md section 16, with the offset of the bad bytes in the
// stream; and, since a sparsevec of a few bytes stands for up to 4 GB of dense values, sparsevec
// rows whose dense tensor would exceed 4096 times the stream's size (and 64 MiB) are an
// InvalidField error on the column.
func DecodeCopy(data []byte, cols CopyColumns) (*CopyData, error) {
	c, err := cols.normalized()
	if err != nil {
		return nil, err
	}
	return asError(decodeCopy(data, &c))
}

// The bound of a sparsevec stream's dense tensor: maxSparseDenseFactor times the stream's bytes,
// and at least maxSparseDenseMin.
const (
	maxSparseDenseFactor = 4096
	maxSparseDenseMin    = 64 << 20
)

// copyHeaderEnd checks the signature, flags and header extension and returns the first tuple's offset.
func copyHeaderEnd(b []byte) (int, *Error) {
	size := len(b)
	if k := min(len(CopySignature), size); string(b[:k]) != CopySignature[:k] {
		return 0, newError(Malformed, "", 0, `not a PostgreSQL binary COPY stream (the signature PGCOPY\n\377\r\n\0 differs)`)
	}
	if size < 19 {
		return 0, newError(Truncated, "", size, "the stream ends inside its 19-byte header after "+strconv.Itoa(size)+" bytes")
	}
	flags := binary.BigEndian.Uint32(b[11:])
	ext := int32(binary.BigEndian.Uint32(b[15:]))
	if flags&0x1ffff != 0 {
		return 0, newError(Malformed, "", 11, "flags 0x"+strconv.FormatUint(uint64(flags), 16)+
			": tuples with OIDs (bit 16) or an unknown critical flag (bits 0 to 15)")
	}
	if ext < 0 {
		return 0, newError(Malformed, "", 15, "negative header extension length "+strconv.Itoa(int(ext)))
	}
	if 19+int(ext) > size {
		return 0, newError(Truncated, "", size, "the stream ends inside its header extension")
	}
	return 19 + int(ext), nil
}

// copyReader walks a stream tuple by tuple, checking each field with its offset.
type copyReader struct {
	buf  []byte
	c    *CopyColumns
	d    int    // the first row's d; -1 before it
	rb   int    // row bytes of the output
	out  []byte // the rows read, little-endian
	n    int
	ids  *CopyIDs
	item int // bytes of a vector item (4, 2; 1 for bit)
}

func (r *copyReader) truncated() *Error {
	return newError(Truncated, "", len(r.buf), "the stream ends after "+strconv.Itoa(len(r.buf))+" bytes, inside a tuple")
}

func decodeCopy(data []byte, c *CopyColumns) (*CopyData, *Error) {
	pos, err := copyHeaderEnd(data)
	if err != nil {
		return nil, err
	}
	r := &copyReader{buf: data, c: c, d: -1}
	switch c.Type {
	case PgVector, PgSparsevec:
		r.item = 4
	case PgHalfvec:
		r.item = 2
	default:
		r.item = 1
	}
	if c.IDType != PgNoID {
		r.ids = &CopyIDs{}
	}
	size := len(data)
	count := c.count()
	for {
		if pos+2 > size {
			return nil, r.truncated()
		}
		fields := int16(binary.BigEndian.Uint16(data[pos:]))
		if fields == -1 {
			if pos+2 != size {
				return nil, newError(Malformed, "", pos+2, strconv.Itoa(size-pos-2)+" bytes after the trailer")
			}
			break
		}
		if int(fields) != count {
			return nil, newError(ShapeMismatch, "", pos, "a tuple of "+strconv.Itoa(int(fields))+" fields, but the COPY has "+
				strconv.Itoa(count)+" columns")
		}
		tuple := pos
		pos += 2
		if c.IDType != PgNoID {
			at, length, err := r.field(pos)
			if err != nil {
				return nil, err
			}
			if err := r.id(at, length); err != nil {
				return nil, err
			}
			pos = at + 4 + max(length, 0)
		}
		at, length, err := r.field(pos)
		if err != nil {
			return nil, err
		}
		if err := r.vector(at, length, tuple); err != nil {
			return nil, err
		}
		pos = at + 4 + length
		r.n++
	}
	d := r.d
	if d < 0 {
		d = max(c.Dims, 0)
	}
	if r.out == nil {
		r.out = []byte{}
	}
	return &CopyData{Tensor: &Tensor{DType: c.Type.DType(), N: r.n, D: d, Data: r.out}, IDs: r.ids}, nil
}

// field reads a field's length word at at: -1 (NULL) or a length whose bytes are all there.
func (r *copyReader) field(at int) (int, int, *Error) {
	if at+4 > len(r.buf) {
		return 0, 0, r.truncated()
	}
	length := int(int32(binary.BigEndian.Uint32(r.buf[at:])))
	if length < -1 {
		return 0, 0, newError(Malformed, "", at, "field length "+strconv.Itoa(length))
	}
	if length >= 0 && length > len(r.buf)-at-4 {
		return 0, 0, r.truncated()
	}
	return at, length, nil
}

func (r *copyReader) id(at, length int) *Error {
	ids, c, v := r.ids, r.c, at+4
	if length == -1 {
		if ids.Nulls == nil {
			ids.Nulls = make([]bool, r.n, r.n+1)
		}
		ids.Nulls = append(ids.Nulls, true)
		switch c.IDType {
		case PgInt8, PgInt4:
			ids.Ints = append(ids.Ints, 0)
		case PgText:
			ids.Texts = append(ids.Texts, "")
		case PgUUID:
			ids.UUIDs = append(ids.UUIDs, [16]byte{})
		}
		return nil
	}
	if ids.Nulls != nil {
		ids.Nulls = append(ids.Nulls, false)
	}
	raw := r.buf[v : v+length]
	if c.IDType == PgText {
		if !utf8.Valid(raw) {
			i := 0
			for i < len(raw) {
				ru, w := utf8.DecodeRune(raw[i:])
				if ru == utf8.RuneError && w <= 1 {
					break
				}
				i += w
			}
			return newError(Malformed, c.IDColumn, v+i, "a text id that is not UTF-8")
		}
		ids.Texts = append(ids.Texts, string(raw))
		return nil
	}
	if w := c.IDType.width(); length != w {
		return newError(LengthMismatch, c.IDColumn, at, "an "+string(c.IDType)+" id of "+strconv.Itoa(length)+
			" bytes (it has "+strconv.Itoa(w)+")")
	}
	switch c.IDType {
	case PgInt8:
		ids.Ints = append(ids.Ints, int64(binary.BigEndian.Uint64(raw)))
	case PgInt4:
		ids.Ints = append(ids.Ints, int64(int32(binary.BigEndian.Uint32(raw))))
	case PgUUID:
		ids.UUIDs = append(ids.UUIDs, [16]byte(raw))
	}
	return nil
}

// vector reads the vector field whose length word is at at, in the tuple that starts at tuple.
func (r *copyReader) vector(at, length, tuple int) *Error {
	c, b, v := r.c, r.buf, at+4
	if length == -1 {
		return newError(InvalidField, c.Column, at, "row "+strconv.Itoa(r.n)+" has a NULL "+string(c.Type))
	}
	head := 4
	if c.Type == PgSparsevec {
		head = 12
	}
	if length < head {
		return newError(LengthMismatch, c.Column, at, "a "+string(c.Type)+" value of "+strconv.Itoa(length)+" bytes")
	}
	var d, nnz, unused, expected int
	switch c.Type {
	case PgBit:
		d = int(int32(binary.BigEndian.Uint32(b[v:])))
		expected = 4 + (d+7)/8
	case PgSparsevec:
		d = int(int32(binary.BigEndian.Uint32(b[v:])))
		nnz = int(int32(binary.BigEndian.Uint32(b[v+4:])))
		unused = int(int32(binary.BigEndian.Uint32(b[v+8:])))
		expected = 12 + 8*nnz
	default:
		d = int(int16(binary.BigEndian.Uint16(b[v:])))
		unused = int(int16(binary.BigEndian.Uint16(b[v+2:])))
		expected = 4 + r.item*d
	}
	if d < 1 {
		return newError(Malformed, c.Column, v, "a "+string(c.Type)+" of "+strconv.Itoa(d)+" dimensions")
	}
	if c.Type == PgSparsevec && (nnz < 0 || nnz > d) {
		return newError(Malformed, c.Column, v+4, "a sparsevec of "+strconv.Itoa(d)+" dimensions with "+
			strconv.Itoa(nnz)+" non-zero values")
	}
	if length != expected {
		return newError(LengthMismatch, c.Column, at, "a "+string(c.Type)+" of "+strconv.Itoa(d)+" dimensions needs "+
			strconv.Itoa(expected)+" bytes, the field has "+strconv.Itoa(length))
	}
	if c.Type != PgBit && unused != 0 {
		off := v + 2
		if c.Type == PgSparsevec {
			off = v + 8
		}
		return newError(Malformed, c.Column, off, "the unused word of a "+string(c.Type)+" is "+strconv.Itoa(unused)+", not 0")
	}
	if r.d < 0 {
		r.d = d
		r.rb = c.Type.DType().RowBytes(d)
		if _, ok := expectedLen(c.Type.DType(), 1, uint64(d)); !ok {
			return newError(InvalidField, c.Column, v, "a "+string(c.Type)+" of "+strconv.Itoa(d)+" dimensions is too large")
		}
		// Every tuple of the usual stream has the first one's length: room for that many rows.
		tupleLen := at + 4 + length - tuple
		rows := (len(b) - tuple) / tupleLen
		if c.Type == PgSparsevec {
			// a sparse row's tuple can be far smaller than its dense row: grow as rows come, each
			// after the bound below (room for one row here would be d*4 bytes before that check)
			rows = 0
		}
		r.out = make([]byte, 0, rows*r.rb)
	} else if d != r.d {
		return newError(ShapeMismatch, c.Column, v, "row "+strconv.Itoa(r.n)+" has "+strconv.Itoa(d)+
			" dimensions, the first row "+strconv.Itoa(r.d))
	}
	if _, ok := expectedLen(c.Type.DType(), uint64(r.n+1), uint64(d)); !ok {
		return newError(InvalidField, c.Column, v, "the vectors do not fit in memory")
	}
	// A sparsevec row of a few bytes can stand for a dense row of up to 4 GB: the dense tensor is
	// bounded by the stream's size, so that a hostile stream cannot exhaust memory.
	if c.Type == PgSparsevec {
		limit, why := max(maxSparseDenseMin, maxSparseDenseFactor*len(b)),
			strconv.Itoa(maxSparseDenseFactor)+" times the stream, at least 64 MiB"
		if c.MaxDenseBytes > 0 {
			limit, why = c.MaxDenseBytes, "CopyColumns.MaxDenseBytes"
		}
		if (r.n+1)*r.rb > limit {
			return newError(InvalidField, c.Column, v, "the dense tensor of these sparsevec rows would exceed "+
				strconv.Itoa(limit)+" bytes ("+why+")")
		}
	}
	start := len(r.out)
	r.out = slices.Grow(r.out, r.rb)[:start+r.rb]
	row := r.out[start:]
	switch c.Type {
	case PgVector:
		swappedCopy(row, b[v+4:v+4+r.rb], 4)
	case PgHalfvec:
		swappedCopy(row, b[v+4:v+4+r.rb], 2)
	case PgBit:
		copy(row, b[v+4:v+4+r.rb])
	case PgSparsevec:
		clear(row)
		idx, val := v+12, v+12+4*nnz
		prev := -1
		for i := range nnz {
			j := int(int32(binary.BigEndian.Uint32(b[idx+4*i:])))
			if j < 0 || j >= d || j <= prev {
				return newError(Malformed, c.Column, idx+4*i, "sparsevec index "+strconv.Itoa(j)+" is out of 0.."+
					strconv.Itoa(d-1)+" or not above the one before it")
			}
			prev = j
		}
		for i := range nnz {
			w := binary.BigEndian.Uint32(b[val+4*i:])
			if w&0x7fffffff == 0 {
				return newError(Malformed, c.Column, val+4*i, "a sparsevec stores no zero value")
			}
			binary.LittleEndian.PutUint32(row[4*int(binary.BigEndian.Uint32(b[idx+4*i:])):], w)
		}
	}
	return nil
}
