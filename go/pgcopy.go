package densewire

import (
	"encoding/binary"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// PostgreSQL binary COPY streams of pgvector columns (SPEC.md section 16): the stream of
// COPY table (id, embedding) FROM STDIN (FORMAT BINARY), written from one tensor, and read back
// from COPY ... TO STDOUT (FORMAT BINARY). Every number of the stream is big-endian.

// The fixed parts of a stream: the 11-byte signature, the 19-byte header densewire writes (flags
// 0, no header extension) and the 2-byte trailer.
const (
	CopySignature = "PGCOPY\n\xff\r\n\x00"
	CopyHeader    = CopySignature + "\x00\x00\x00\x00" + "\x00\x00\x00\x00"
	CopyTrailer   = "\xff\xff"
)

// PgType is the PostgreSQL type of the vector column of a COPY (SPEC.md section 16.2).
type PgType string

// The vector column types and the dtype a reader returns for each.
const (
	PgVector    PgType = "vector"    // pgvector vector(d): float32
	PgHalfvec   PgType = "halfvec"   // pgvector halfvec(d): float16
	PgBit       PgType = "bit"       // PostgreSQL bit(d) / varbit: binary
	PgSparsevec PgType = "sparsevec" // pgvector sparsevec(d): float32, dense
)

// DType is the densewire dtype of the column's values: what a reader returns.
func (p PgType) DType() DType {
	switch p {
	case PgHalfvec:
		return Float16
	case PgBit:
		return Binary
	}
	return Float32
}

// maxDims is the largest d pgvector accepts for each type (a bit string's length is an int32).
func (p PgType) maxDims() int {
	switch p {
	case PgBit:
		return math.MaxInt32
	case PgSparsevec:
		return 1_000_000_000
	}
	return 16000
}

const maxSparseNNZ = 16000

// PgIDType is the PostgreSQL type of the optional id column of a COPY.
type PgIDType string

// The id column types; PgNoID for a COPY of the vector column alone.
const (
	PgNoID PgIDType = ""
	PgInt8 PgIDType = "int8" // bigint
	PgInt4 PgIDType = "int4" // integer
	PgText PgIDType = "text" // text, varchar
	PgUUID PgIDType = "uuid"
)

func (p PgIDType) width() int {
	switch p {
	case PgInt8:
		return 8
	case PgInt4:
		return 4
	case PgUUID:
		return 16
	}
	return -1
}

// CopyColumns are the columns of one COPY: an optional id column, then one vector column.
// The zero value is a single vector column named "embedding".
type CopyColumns struct {
	Type     PgType   // the vector column's type; "" is PgVector
	Column   string   // the vector column's name (in the COPY statement and error fields); "" is "embedding"
	IDType   PgIDType // the id column's type; PgNoID ("") for no id column
	IDColumn string   // the id column's name; "" is "id"
	// Dims is, when reading, the d of the tensor an empty stream gives (a stream of no rows says
	// nothing of d). Writing takes d from the tensor.
	Dims int
	// MaxDenseBytes is, when reading a sparsevec column, the largest dense tensor to build, in
	// bytes; 0 is the default bound (4096 times the stream's size, and at least 64 MiB).
	MaxDenseBytes int
}

// normalized fills the defaults and checks the types (InvalidField on the column's name).
func (c CopyColumns) normalized() (CopyColumns, *Error) {
	if c.Type == "" {
		c.Type = PgVector
	}
	if c.Column == "" {
		c.Column = "embedding"
	}
	if c.IDColumn == "" {
		c.IDColumn = "id"
	}
	switch c.Type {
	case PgVector, PgHalfvec, PgBit, PgSparsevec:
	default:
		return c, newError(InvalidField, c.Column, -1, "unknown vector type "+strconv.Quote(string(c.Type))+
			"; expected one of vector, halfvec, bit, sparsevec")
	}
	switch c.IDType {
	case PgNoID, PgInt8, PgInt4, PgText, PgUUID:
	default:
		return c, newError(InvalidField, c.IDColumn, -1, "unknown id type "+strconv.Quote(string(c.IDType))+
			"; expected one of int8, int4, text, uuid")
	}
	return c, nil
}

// count is the number of fields of every tuple.
func (c *CopyColumns) count() int {
	if c.IDType == PgNoID {
		return 1
	}
	return 2
}

// Names are the column names in COPY order (defaults applied).
func (c CopyColumns) Names() []string {
	n, _ := c.normalized()
	if n.IDType == PgNoID {
		return []string{n.Column}
	}
	return []string{n.IDColumn, n.Column}
}

// CopyIDs are the values of an id column, one per row: Ints for int8 and int4 columns, Texts for
// text, UUIDs (16 bytes in the order of the canonical text, see ParseUUID) for uuid. Nulls, when
// not nil, marks the rows whose id is NULL (their value in the typed slice is ignored).
type CopyIDs struct {
	Ints  []int64
	Texts []string
	UUIDs [][16]byte
	Nulls []bool
}

// Null reports whether row i's id is NULL.
func (ids *CopyIDs) Null(i int) bool { return ids.Nulls != nil && ids.Nulls[i] }

func (ids *CopyIDs) rows(lo, hi int) *CopyIDs {
	if ids == nil {
		return nil
	}
	part := func(n int) bool { return n >= hi }
	out := &CopyIDs{}
	if part(len(ids.Ints)) {
		out.Ints = ids.Ints[lo:hi]
	} else {
		out.Ints = ids.Ints
	}
	if part(len(ids.Texts)) {
		out.Texts = ids.Texts[lo:hi]
	} else {
		out.Texts = ids.Texts
	}
	if part(len(ids.UUIDs)) {
		out.UUIDs = ids.UUIDs[lo:hi]
	} else {
		out.UUIDs = ids.UUIDs
	}
	if ids.Nulls != nil && part(len(ids.Nulls)) {
		out.Nulls = ids.Nulls[lo:hi]
	} else {
		out.Nulls = ids.Nulls
	}
	return out
}

// CopyData is a decoded stream: the vector column as one (n, d) tensor of the type's dtype, and
// the ids (nil without an id column).
type CopyData struct {
	Tensor *Tensor
	IDs    *CopyIDs
}

// ------------------------------------------------------------------------------------ writing

// EncodeCopy returns the whole binary COPY stream (header, one tuple per row of t, trailer) of t
// for a column of cols.Type, with ids in a first column when cols.IDType is set (nil otherwise).
// It checks the whole input before writing any byte (SPEC.md section 16.2): NaN or ±Infinity
// after conversion is NonFinite on "COLUMN[ROW][DIM]", d outside the type's range InvalidField on
// the column, a bad id InvalidField on "ID_COLUMN[ROW]".
func EncodeCopy(t *Tensor, cols CopyColumns, ids *CopyIDs) ([]byte, error) {
	c, err := cols.normalized()
	if err != nil {
		return nil, err
	}
	tuples, err := prepareTuples(t, &c, ids, 0)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(CopyHeader)+tuples.size+len(CopyTrailer))
	out = append(out, CopyHeader...)
	out = tuples.append(out)
	return append(out, CopyTrailer...), nil
}

// AppendCopyTuples appends the tuples of t's rows to dst (no header, no trailer: see CopyHeader
// and CopyTrailer), checked as EncodeCopy checks them, row0 numbering the rows in error fields.
// On an error dst is returned unchanged.
func AppendCopyTuples(dst []byte, t *Tensor, cols CopyColumns, ids *CopyIDs, row0 int) ([]byte, error) {
	c, err := cols.normalized()
	if err != nil {
		return dst, err
	}
	tuples, err := prepareTuples(t, &c, ids, row0)
	if err != nil {
		return dst, err
	}
	return tuples.append(slices.Grow(dst, tuples.size)), nil
}

// DefaultCopyChunkRows is the rows per chunk of a CopyReader when none is given.
const DefaultCopyChunkRows = 4096

// CopyReader streams the binary COPY stream of a tensor as an io.Reader, for a driver that sends
// COPY data from one (pgx: conn.PgConn().CopyFrom(ctx, reader, CopyFromSQL(table, cols))). It
// encodes ChunkRows rows at a time into one reused buffer, checking each chunk before any byte of
// it is read: memory stays bounded by the chunk whatever the tensor's size. An invalid row makes
// Read return its *Error, and the driver then aborts the COPY (pgx sends CopyFail), so that
// PostgreSQL keeps no row of it.
type CopyReader struct {
	t         *Tensor
	cols      CopyColumns
	ids       *CopyIDs
	chunkRows int
	next      int  // the first row not yet encoded
	trailer   bool // the trailer is in buf
	buf       []byte
	off       int
	err       error
	written   int64
}

// NewCopyReader returns a CopyReader of t's stream, chunkRows rows at a time (0 means
// DefaultCopyChunkRows).
func NewCopyReader(t *Tensor, cols CopyColumns, ids *CopyIDs, chunkRows int) *CopyReader {
	if chunkRows <= 0 {
		chunkRows = DefaultCopyChunkRows
	}
	r := &CopyReader{t: t, ids: ids, chunkRows: chunkRows}
	c, err := cols.normalized()
	r.cols = c
	switch {
	case err != nil:
		r.err = err
	case t == nil:
		r.err = newError(InvalidField, c.Column, -1, "no tensor")
	case c.IDType != PgNoID:
		if err := checkIDLengths(ids, &c, t.N); err != nil {
			r.err = err
		}
	}
	r.buf = append(r.buf, CopyHeader...)
	return r
}

// Read implements io.Reader.
func (r *CopyReader) Read(p []byte) (int, error) {
	for r.off == len(r.buf) {
		if r.err != nil {
			return 0, r.err
		}
		if r.trailer {
			return 0, io.EOF
		}
		r.buf, r.off = r.buf[:0], 0
		if r.next >= r.t.N {
			r.buf = append(r.buf, CopyTrailer...)
			r.trailer = true
			continue
		}
		hi := min(r.next+r.chunkRows, r.t.N)
		tuples, err := prepareTuples(r.t.rows(r.next, hi), &r.cols, r.ids.rows(r.next, hi), r.next)
		if err != nil {
			r.err = err
			return 0, err
		}
		r.buf = tuples.append(r.buf)
		r.next = hi
	}
	n := copy(p, r.buf[r.off:])
	r.off += n
	r.written += int64(n)
	return n, nil
}

// Rows is the number of rows whose tuples have been produced so far.
func (r *CopyReader) Rows() int { return r.next }

// Bytes is the number of bytes read so far.
func (r *CopyReader) Bytes() int64 { return r.written }

// rows is a view of rows lo to hi of t.
func (t *Tensor) rows(lo, hi int) *Tensor {
	rb := t.RowBytes()
	return &Tensor{DType: t.DType, N: hi - lo, D: t.D, Data: t.Data[lo*rb : hi*rb]}
}

// CopyFromSQL is the statement that loads a stream of cols into table:
// COPY "table" ("id", "embedding") FROM STDIN (FORMAT BINARY). A table "schema.name" has each
// part quoted; a table already in double quotes is used as given.
func CopyFromSQL(table string, cols CopyColumns) string {
	return "COPY " + quoteTable(table) + " (" + columnList(cols) + ") FROM STDIN (FORMAT BINARY)"
}

// CopyToSQL is the statement that reads cols of table as a stream DecodeCopy reads:
// COPY "table" ("id", "embedding") TO STDOUT (FORMAT BINARY). For an order or a filter, write
// COPY (SELECT id, embedding FROM ... ORDER BY id) TO STDOUT (FORMAT BINARY) instead.
func CopyToSQL(table string, cols CopyColumns) string {
	return "COPY " + quoteTable(table) + " (" + columnList(cols) + ") TO STDOUT (FORMAT BINARY)"
}

// QuoteIdent double-quotes an SQL identifier: embedding -> "embedding".
func QuoteIdent(name string) string {
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

func quoteTable(table string) string {
	if strings.HasPrefix(table, `"`) {
		return table
	}
	parts := strings.Split(table, ".")
	for i, p := range parts {
		parts[i] = QuoteIdent(p)
	}
	return strings.Join(parts, ".")
}

func columnList(cols CopyColumns) string {
	names := cols.Names()
	for i, n := range names {
		names[i] = QuoteIdent(n)
	}
	return strings.Join(names, ", ")
}

// copyTuples is a checked input, ready to be written: the values in the column's dtype
// (little-endian, packed bits for bit), the ids, and the byte size of the tuples.
type copyTuples struct {
	cols   *CopyColumns
	n, d   int
	values []byte // n rows of rowBytes, little-endian
	ids    *CopyIDs
	nnz    []int32 // sparsevec: non-zero values per row
	size   int
}

func prepareTuples(t *Tensor, c *CopyColumns, ids *CopyIDs, row0 int) (*copyTuples, *Error) {
	if t == nil {
		return nil, newError(InvalidField, c.Column, -1, "no tensor")
	}
	if err := checkTensorData(t); err != nil {
		return nil, err
	}
	values, err := copyValues(t, c, row0)
	if err != nil {
		return nil, err
	}
	p := &copyTuples{cols: c, n: t.N, d: t.D, values: values}
	size := 0
	if c.IDType != PgNoID {
		idBytes, err := checkIDs(ids, c, t.N, row0)
		if err != nil {
			return nil, err
		}
		p.ids = ids
		size += (4 + 2) * t.N // the field count and the id's length word
		size += idBytes
	} else {
		size += 2 * t.N
	}
	switch c.Type {
	case PgSparsevec:
		p.nnz = make([]int32, t.N)
		total := 0
		for r := range t.N {
			k := 0
			for _, w := range u32s(values[4*r*t.D : 4*(r+1)*t.D]) {
				if w&0x7fffffff != 0 {
					k++
				}
			}
			if k > maxSparseNNZ {
				return nil, newError(InvalidField, c.Column+"["+strconv.Itoa(row0+r)+"]", -1, "a sparsevec holds at most "+
					strconv.Itoa(maxSparseNNZ)+" non-zero values, row "+strconv.Itoa(row0+r)+" has "+strconv.Itoa(k))
			}
			p.nnz[r] = int32(k)
			total += k
		}
		size += t.N*(4+12) + 8*total
	default:
		size += t.N * (4 + 4 + c.Type.DType().RowBytes(t.D))
	}
	p.size = size
	return p, nil
}

// checkTensorData checks that the tensor's buffer holds its shape (a Tensor built by hand may not).
func checkTensorData(t *Tensor) *Error {
	if !t.DType.Valid() {
		return newError(UnknownDType, "dtype", -1, "invalid dtype "+t.DType.String())
	}
	if t.N < 0 || t.D < 0 || t.D > maxDim {
		return newError(InvalidField, "shape", -1, "invalid shape ("+strconv.Itoa(t.N)+", "+strconv.Itoa(t.D)+")")
	}
	if want, ok := expectedLen(t.DType, uint64(t.N), uint64(t.D)); !ok || want != len(t.Data) {
		return lengthMismatch("", len(t.Data), want)
	}
	return nil
}

// copyValues converts t to the column's dtype (SPEC.md section 16.2) and checks it: the values as
// little-endian float32 (vector, sparsevec), float16 (halfvec) or packed bits with zero pad bits
// (bit). The result may alias t.Data.
func copyValues(t *Tensor, c *CopyColumns, row0 int) ([]byte, *Error) {
	n, d := t.N, t.D
	if d < 1 || d > c.Type.maxDims() {
		return nil, newError(InvalidField, c.Column, -1, "a "+string(c.Type)+" has 1 to "+strconv.Itoa(c.Type.maxDims())+
			" dimensions, not "+strconv.Itoa(d))
	}
	if c.Type == PgBit {
		if t.DType == Binary {
			if d%8 == 0 {
				return t.Data, nil
			}
			out := slices.Clone(t.Data) // pad bits are written 0 (SPEC.md section 3.4)
			rb, mask := (d+7)/8, byte(0xff<<(8-d%8))
			for r := range n {
				out[r*rb+rb-1] &= mask
			}
			return out, nil
		}
		if t.DType == Float64 {
			v, _ := t.Float64()
			packed, _ := FromFloat64(v, n, d, Binary)
			return packed.Data, nil
		}
		v, _ := t.Float32() // float16, bfloat16, int8 and uint8 widen exactly: the sign test is the same
		return PackBinary(v, n, d), nil
	}
	switch t.DType {
	case Int8, Uint8, Binary:
		return nil, newError(InvalidField, c.Column, -1, "a "+t.DType.String()+" tensor cannot fill a "+string(c.Type)+" column")
	}
	var out []byte
	if c.Type == PgHalfvec {
		switch t.DType {
		case Float16:
			out = t.Data
		case Float64:
			out = make([]byte, 2*n*d)
			for i := range n * d {
				binary.LittleEndian.PutUint16(out[2*i:], float64ToFloat16Bits(f64frombits(binary.LittleEndian.Uint64(t.Data[8*i:]))))
			}
		default:
			v, _ := t.Float32()
			h, _ := FromFloat32(v, n, d, Float16)
			out = h.Data
		}
		for i := 0; i < len(out); i += 2 {
			if binary.LittleEndian.Uint16(out[i:])&0x7c00 == 0x7c00 {
				return nil, nonFiniteAt(c, row0, i/2, d, float64(Float16ToFloat32(binary.LittleEndian.Uint16(out[i:]))))
			}
		}
		return out, nil
	}
	if t.DType == Float32 {
		out = t.Data
	} else {
		v, _ := t.Float32() // float16 and bfloat16 widen exactly, float64 rounds by section 3.3
		out = Float32Bytes(v)
	}
	if i := firstNonFinite32(out); i >= 0 {
		return nil, nonFiniteAt(c, row0, i, d, float64(f32frombits(binary.LittleEndian.Uint32(out[4*i:]))))
	}
	return out, nil
}

// firstNonFinite32 is the index of the first NaN or infinity of little-endian float32 data, or -1;
// two items a step (an all-ones exponent leaves a zero lane in (w & exp) ^ exp).
func firstNonFinite32(b []byte) int {
	const exp = 0x7f800000_7f800000
	i := 0
	for ; i+8 <= len(b); i += 8 {
		if x := binary.LittleEndian.Uint64(b[i:])&exp ^ exp; uint32(x) == 0 || x>>32 == 0 {
			break
		}
	}
	for ; i+4 <= len(b); i += 4 {
		if binary.LittleEndian.Uint32(b[i:])&0x7f800000 == 0x7f800000 {
			return i / 4
		}
	}
	return -1
}

func nonFiniteAt(c *CopyColumns, row0, item, d int, v float64) *Error {
	return newError(NonFinite, c.Column+"["+strconv.Itoa(row0+item/d)+"]["+strconv.Itoa(item%d)+"]", -1,
		strconv.FormatFloat(v, 'g', -1, 64)+" cannot be stored in a "+string(c.Type)+
			" (pgvector refuses NaN and infinity)")
}

// u32s iterates the little-endian uint32 words of b.
func u32s(b []byte) func(func(int, uint32) bool) {
	return func(yield func(int, uint32) bool) {
		for i := 0; i+4 <= len(b); i += 4 {
			if !yield(i/4, binary.LittleEndian.Uint32(b[i:])) {
				return
			}
		}
	}
}

// checkIDs checks the ids of n rows for the id column and returns the bytes of their values.
func checkIDs(ids *CopyIDs, c *CopyColumns, n, row0 int) (int, *Error) {
	name := c.IDColumn
	if err := checkIDLengths(ids, c, n); err != nil {
		return 0, err
	}
	field := func(r int) string { return name + "[" + strconv.Itoa(row0+r) + "]" }
	size := 0
	switch c.IDType {
	case PgInt4:
		for r, v := range ids.Ints {
			if v < math.MinInt32 || v > math.MaxInt32 {
				if !ids.Null(r) {
					return 0, newError(InvalidField, field(r), -1, "id "+strconv.FormatInt(v, 10)+" is out of the int4 range")
				}
			}
		}
		size = 4 * n
	case PgText:
		for r, s := range ids.Texts {
			if ids.Null(r) {
				continue
			}
			if !utf8.ValidString(s) {
				return 0, newError(InvalidField, field(r), -1, "text id "+strconv.Quote(s)+" is not UTF-8")
			}
			if strings.IndexByte(s, 0) >= 0 {
				return 0, newError(InvalidField, field(r), -1, "text id "+strconv.Quote(s)+" holds a NUL byte, which PostgreSQL text cannot")
			}
			size += len(s)
		}
		return size, nil
	default:
		size = c.IDType.width() * n
	}
	if ids.Nulls != nil {
		for _, null := range ids.Nulls {
			if null {
				size -= c.IDType.width()
			}
		}
	}
	return size, nil
}

// checkIDLengths checks that ids has one value (and NULL flag) per row for the id column's type.
func checkIDLengths(ids *CopyIDs, c *CopyColumns, n int) *Error {
	name := c.IDColumn
	if ids == nil {
		return newError(InvalidField, name, -1, "the COPY has an id column but no ids were given")
	}
	var have int
	var kind string
	switch c.IDType {
	case PgInt8, PgInt4:
		have, kind = len(ids.Ints), "Ints"
	case PgText:
		have, kind = len(ids.Texts), "Texts"
	case PgUUID:
		have, kind = len(ids.UUIDs), "UUIDs"
	}
	if have != n {
		return newError(ShapeMismatch, name, -1, strconv.Itoa(have)+" ids (CopyIDs."+kind+") for "+strconv.Itoa(n)+
			" vectors, in a "+string(c.IDType)+" column")
	}
	if ids.Nulls != nil && len(ids.Nulls) != n {
		return newError(ShapeMismatch, name, -1, strconv.Itoa(len(ids.Nulls))+" NULL flags for "+strconv.Itoa(n)+" vectors")
	}
	return nil
}

// append writes the tuples: per row the field count, the id field, the value's length and header
// words, then the row's values byte-swapped to big-endian in one pass over the row.
func (p *copyTuples) append(dst []byte) []byte {
	c, n, d := p.cols, p.n, p.d
	start := len(dst)
	dst = slices.Grow(dst, p.size)[:start+p.size]
	out := dst[start:]
	count := uint16(c.count())
	idWidth := c.IDType.width()
	rb := c.Type.DType().RowBytes(d)
	valueLen := uint32(4 + rb)
	at := 0
	for r := range n {
		binary.BigEndian.PutUint16(out[at:], count)
		at += 2
		if c.IDType != PgNoID {
			if p.ids.Null(r) {
				binary.BigEndian.PutUint32(out[at:], math.MaxUint32) // -1: NULL
				at += 4
			} else {
				switch c.IDType {
				case PgInt8:
					binary.BigEndian.PutUint32(out[at:], uint32(idWidth))
					binary.BigEndian.PutUint64(out[at+4:], uint64(p.ids.Ints[r]))
				case PgInt4:
					binary.BigEndian.PutUint32(out[at:], uint32(idWidth))
					binary.BigEndian.PutUint32(out[at+4:], uint32(int32(p.ids.Ints[r])))
				case PgUUID:
					binary.BigEndian.PutUint32(out[at:], uint32(idWidth))
					copy(out[at+4:], p.ids.UUIDs[r][:])
				case PgText:
					s := p.ids.Texts[r]
					binary.BigEndian.PutUint32(out[at:], uint32(len(s)))
					copy(out[at+4:], s)
					at += len(s)
				}
				at += 4
				if c.IDType != PgText {
					at += idWidth
				}
			}
		}
		row := p.values[r*rb : (r+1)*rb]
		switch c.Type {
		case PgVector, PgHalfvec:
			binary.BigEndian.PutUint32(out[at:], valueLen)
			binary.BigEndian.PutUint16(out[at+4:], uint16(d))
			binary.BigEndian.PutUint16(out[at+6:], 0)
			at += 8
			if c.Type == PgVector {
				swappedCopy(out[at:at+rb], row, 4)
			} else {
				swappedCopy(out[at:at+rb], row, 2)
			}
			at += rb
		case PgBit:
			binary.BigEndian.PutUint32(out[at:], valueLen)
			binary.BigEndian.PutUint32(out[at+4:], uint32(d))
			at += 8
			at += copy(out[at:], row)
		case PgSparsevec:
			nnz := int(p.nnz[r])
			binary.BigEndian.PutUint32(out[at:], uint32(12+8*nnz))
			binary.BigEndian.PutUint32(out[at+4:], uint32(d))
			binary.BigEndian.PutUint32(out[at+8:], uint32(nnz))
			binary.BigEndian.PutUint32(out[at+12:], 0)
			at += 16
			idx, val := at, at+4*nnz
			for j, w := range u32s(row) {
				if w&0x7fffffff != 0 { // +0.0 and -0.0 are left out: pgvector refuses zero values
					binary.BigEndian.PutUint32(out[idx:], uint32(j))
					binary.BigEndian.PutUint32(out[val:], w)
					idx += 4
					val += 4
				}
			}
			at += 8 * nnz
		}
	}
	if at != p.size {
		panic("densewire: COPY tuple size miscounted")
	}
	return dst
}
