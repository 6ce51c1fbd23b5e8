// Package arrowipc is densewire's Arrow codec (SPEC.md section 10): a tensor as an Arrow IPC
// stream of one schema message, one record batch of n rows and the end-of-stream marker, with one
// non-nullable column "embedding" (FixedSizeList of d items; bfloat16 as UInt16 bits; binary as
// FixedSizeBinary(ceil(d/8))) and the densewire.* metadata. It is built on
// github.com/apache/arrow-go/v18 and kept out of the core package so that programs which do not
// need Arrow do not compile it.
//
// Importing the package registers the codec with densewire.Encode, densewire.Decode, the Client
// and the handlers:
//
//	import _ "github.com/densewire/densewire/go/arrowipc"
package arrowipc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	densewire "github.com/densewire/densewire/go"
)

func init() {
	densewire.RegisterArrow(Encode, Decode)
	densewire.RegisterArrowRagged(DecodeRagged)
	densewire.RegisterArrowSparse(DecodeSparse)
}

// Metadata keys of SPEC.md section 10.
const (
	KeyVersion      = "densewire.version"
	KeyDType        = "densewire.dtype"
	KeyDimensions   = "densewire.dimensions"
	KeyModel        = "densewire.model"
	KeyPromptTokens = "densewire.prompt_tokens"
	KeyTotalTokens  = "densewire.total_tokens"
	KeyQuantization = "densewire.quantization" // SPEC.md section 17.5
	Column          = "embedding"
)

func itemType(dt densewire.DType) arrow.DataType {
	switch dt {
	case densewire.Float32:
		return arrow.PrimitiveTypes.Float32
	case densewire.Float16:
		return arrow.FixedWidthTypes.Float16
	case densewire.BFloat16:
		return arrow.PrimitiveTypes.Uint16
	case densewire.Float64:
		return arrow.PrimitiveTypes.Float64
	case densewire.Int8:
		return arrow.PrimitiveTypes.Int8
	case densewire.Uint8:
		return arrow.PrimitiveTypes.Uint8
	}
	return nil
}

func columnType(dt densewire.DType, d int) arrow.DataType {
	if dt == densewire.Binary {
		return &arrow.FixedSizeBinaryType{ByteWidth: dt.RowBytes(d)}
	}
	return arrow.FixedSizeListOfField(int32(d), arrow.Field{Name: "item", Type: itemType(dt), Nullable: false})
}

// Encode returns the Arrow IPC stream of the tensor (and of an embeddings response's meta, in the
// schema metadata). The tensor's data is handed to the writer without a copy.
func Encode(t *densewire.Tensor, meta *densewire.Meta) ([]byte, error) {
	if !t.DType.Valid() {
		return nil, &densewire.Error{Category: densewire.UnknownDType, Field: "dtype", Offset: -1, Message: "invalid dtype " + t.DType.String()}
	}
	if t.D > math.MaxInt32 {
		return nil, &densewire.Error{Category: densewire.InvalidField, Field: "shape", Offset: -1, Message: "Arrow lists hold at most 2^31-1 items"}
	}
	if _, err := densewire.NewTensor(t.DType, t.N, t.D, t.Data); err != nil {
		return nil, err
	}
	keys := []string{KeyVersion, KeyDType, KeyDimensions}
	vals := []string{"1", t.DType.String(), strconv.Itoa(t.D)}
	if meta != nil {
		keys = append(keys, KeyModel, KeyPromptTokens, KeyTotalTokens)
		vals = append(vals, meta.Model, strconv.FormatUint(meta.PromptTokens, 10), strconv.FormatUint(meta.TotalTokens, 10))
		if meta.Quantization != "" {
			keys = append(keys, KeyQuantization)
			vals = append(vals, meta.Quantization)
		}
	}
	typ := columnType(t.DType, t.D)
	field := arrow.Field{Name: Column, Type: typ, Nullable: false,
		Metadata: arrow.NewMetadata([]string{KeyDType}, []string{t.DType.String()})}
	md := arrow.NewMetadata(keys, vals)
	schema := arrow.NewSchema([]arrow.Field{field}, &md)

	values := memory.NewBufferBytes(t.Data)
	var data arrow.ArrayData
	if t.DType == densewire.Binary {
		data = array.NewData(typ, t.N, []*memory.Buffer{nil, values}, nil, 0, 0)
	} else {
		child := array.NewData(itemType(t.DType), t.N*t.D, []*memory.Buffer{nil, values}, nil, 0, 0)
		defer child.Release()
		data = array.NewData(typ, t.N, []*memory.Buffer{nil}, []arrow.ArrayData{child}, 0, 0)
	}
	defer data.Release()
	col := array.MakeFromData(data)
	defer col.Release()
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, int64(t.N))
	defer rec.Release()

	var buf bytes.Buffer
	buf.Grow(len(t.Data) + 1024)
	w := ipc.NewWriter(&buf, ipc.WithSchema(schema))
	if err := w.Write(rec); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func fail(c densewire.Category, field, msg string) *densewire.Error {
	return &densewire.Error{Category: c, Field: field, Offset: -1, Message: msg}
}

// Decode reads an Arrow IPC stream written by any Arrow implementation (pyarrow, arrow-go, arrow-rs,
// Arrow Java) per SPEC.md section 10. The dtype comes from the densewire.dtype metadata (of the
// field, else of the schema, else the Arrow type for the unambiguous ones); d from the list size, or
// for binary from densewire.dimensions. Record batches are concatenated.
//
// Errors (SPEC.md section 10): a stream that ends before its record batch is Truncated at
// len(body); one that cannot be read is Malformed; a missing or mistyped "embedding" column, or
// nulls in it, is InvalidField on "embedding"; an unknown dtype in the metadata is UnknownDType on
// "densewire.dtype". The end-of-stream marker is optional. The stream's framing and flatbuffer
// metadata are verified before arrow-go reads them, so hostile lengths are errors, not
// allocations.
func Decode(body []byte) (t *densewire.Tensor, meta *densewire.Meta, err error) {
	defer func() {
		if p := recover(); p != nil { // arrow-go on hostile input: never crash the caller
			t, meta, err = nil, nil, fail(densewire.Malformed, "", fmt.Sprint("invalid Arrow stream: ", p))
		}
	}()
	schema, batches, release, e := readStream(body)
	if e != nil {
		return nil, nil, e
	}
	defer release()
	if i := schema.Metadata().FindKey(KeyKind); i >= 0 { // SPEC.md 20: a tensor stream says no kind
		return nil, nil, fail(densewire.InvalidField, KeyKind, "a tensor stream has no "+KeyKind+", this one says "+
			strconv.Quote(schema.Metadata().Values()[i])+": decode it with DecodeRagged or DecodeSparse")
	}
	idx := schema.FieldIndices(Column)
	if len(idx) != 1 {
		return nil, nil, fail(densewire.InvalidField, Column, "the stream has no single column \"embedding\"")
	}
	field := schema.Field(idx[0])
	dtype, d, e := columnDType(schema, field)
	if e != nil {
		return nil, nil, e
	}
	rb := dtype.RowBytes(d)
	var (
		chunks [][]byte
		n      int
	)
	for _, rec := range batches {
		col := rec.Column(idx[0])
		if col.NullN() > 0 {
			return nil, nil, fail(densewire.InvalidField, Column, "the embedding column has nulls")
		}
		vals, e := columnBytes(col, dtype, d)
		if e != nil {
			return nil, nil, e
		}
		chunks = append(chunks, vals)
		n += col.Len()
	}
	var data []byte
	if len(chunks) == 1 {
		data = chunks[0] // Go-allocated and owned by the GC: safe to keep after Release
	} else {
		data = make([]byte, 0, n*rb)
		for _, c := range chunks {
			data = append(data, c...)
		}
	}
	tensor, nerr := densewire.NewTensor(dtype, n, d, data)
	if nerr != nil {
		return nil, nil, nerr
	}
	md := schema.Metadata()
	q := md.FindKey(KeyQuantization)
	if i := md.FindKey(KeyModel); i >= 0 || md.FindKey(KeyPromptTokens) >= 0 || md.FindKey(KeyTotalTokens) >= 0 || q >= 0 {
		meta = &densewire.Meta{}
		if i >= 0 {
			meta.Model = md.Values()[i]
		}
		if q >= 0 {
			meta.Quantization = md.Values()[q]
		}
		for key, dst := range map[string]*uint64{KeyPromptTokens: &meta.PromptTokens, KeyTotalTokens: &meta.TotalTokens} {
			if j := md.FindKey(key); j >= 0 {
				v, perr := strconv.ParseUint(md.Values()[j], 10, 64)
				if perr != nil {
					return nil, nil, fail(densewire.InvalidField, key, key+" is not a count: "+strconv.Quote(md.Values()[j]))
				}
				*dst = v
			}
		}
	}
	return tensor, meta, nil
}

// readStream reads a whole IPC stream: its schema and its record batches, retained until release is
// called. A stream without a record batch is truncated (SPEC.md sections 10 and 15.7).
func readStream(body []byte) (*arrow.Schema, []arrow.RecordBatch, func(), *densewire.Error) {
	if e := verifyStream(body); e != nil {
		return nil, nil, nil, e
	}
	alloc := &boundedAllocator{limit: 64*len(body) + 1<<20}
	r, rerr := ipc.NewReader(bytes.NewReader(body), ipc.WithAllocator(alloc))
	if rerr != nil {
		return nil, nil, nil, streamError(rerr, len(body))
	}
	defer r.Release()
	var batches []arrow.RecordBatch
	release := func() {
		for _, b := range batches {
			b.Release()
		}
	}
	for r.Next() {
		rec := r.RecordBatch()
		rec.Retain()
		batches = append(batches, rec)
		// a batch's length and its columns' lengths must agree (pyarrow: "Array length did not match
		// record batch length"); arrow-go does not check (found by Jazzer on Arrow Java, Java finding 5)
		for i, col := range rec.Columns() {
			if rec.NumRows() < 0 || int64(col.Len()) != rec.NumRows() {
				release()
				return nil, nil, nil, fail(densewire.Malformed, "", "a record batch of "+strconv.FormatInt(rec.NumRows(), 10)+
					" rows has a column "+strconv.Itoa(i)+" of "+strconv.Itoa(col.Len()))
			}
		}
	}
	if err := r.Err(); err != nil {
		release()
		return nil, nil, nil, streamError(err, len(body))
	}
	if len(batches) == 0 {
		return nil, nil, nil, &densewire.Error{Category: densewire.Truncated, Offset: len(body),
			Message: "the Arrow stream ends before its record batch"}
	}
	// framing first (truncated), then structure (malformed), then meaning: SPEC.md section 10
	if e := schemaUTF8(r.Schema()); e != nil {
		release()
		return nil, nil, nil, e
	}
	return r.Schema(), batches, release, nil
}

// schemaUTF8 checks that every name, metadata key and metadata value of the schema (its fields',
// nested ones included) is UTF-8: otherwise the stream is Malformed (SPEC.md section 10, structure is
// checked before meaning), not a table or tensor with U+FFFD in its names.
func schemaUTF8(schema *arrow.Schema) *densewire.Error {
	bad := func(what string) *densewire.Error {
		return fail(densewire.Malformed, "", "the Arrow schema's "+what+" is not valid UTF-8")
	}
	meta := func(md arrow.Metadata, of string) *densewire.Error {
		for i, k := range md.Keys() {
			if !utf8.ValidString(k) || !utf8.ValidString(md.Values()[i]) {
				return bad("metadata of " + of)
			}
		}
		return nil
	}
	var field func(f arrow.Field, of string) *densewire.Error
	field = func(f arrow.Field, of string) *densewire.Error {
		if !utf8.ValidString(f.Name) {
			return bad("name of " + of)
		}
		if e := meta(f.Metadata, of); e != nil {
			return e
		}
		if nested, ok := f.Type.(arrow.NestedType); ok {
			for j, child := range nested.Fields() {
				if e := field(child, of+" child "+strconv.Itoa(j)); e != nil {
					return e
				}
			}
		}
		return nil
	}
	if e := meta(schema.Metadata(), "the schema"); e != nil {
		return e
	}
	for i, f := range schema.Fields() {
		if e := field(f, "field "+strconv.Itoa(i)); e != nil {
			return e
		}
	}
	return nil
}

// boundedAllocator refuses allocations beyond what a stream of this size can need (64 times its
// size, for compressed buffers), so that a forged length in a hostile stream is an error rather
// than an attempt to allocate gigabytes. Its memory belongs to the Go heap, so the decoded tensor
// may keep it after the reader is released.
type boundedAllocator struct {
	limit, total int
}

var errTooLarge = errors.New("the stream declares buffers larger than it can hold")

func (a *boundedAllocator) take(size int) {
	a.total += max(size, 0)
	if size > a.limit || a.total > 4*a.limit {
		panic(errTooLarge)
	}
}

func (a *boundedAllocator) Allocate(size int) []byte {
	a.take(size)
	return memory.DefaultAllocator.Allocate(size)
}

func (a *boundedAllocator) Reallocate(size int, b []byte) []byte {
	a.take(size - len(b))
	return memory.DefaultAllocator.Reallocate(size, b)
}

func (a *boundedAllocator) Free(b []byte) { memory.DefaultAllocator.Free(b) }

func streamError(err error, size int) *densewire.Error {
	e := fail(densewire.Malformed, "", "invalid Arrow stream: "+err.Error())
	if errors.Is(err, io.ErrUnexpectedEOF) {
		e.Category, e.Offset = densewire.Truncated, size
	}
	e.Err = err
	return e
}

// columnDType works out the dtype and d of the embedding column and checks its Arrow type.
func columnDType(schema *arrow.Schema, field arrow.Field) (densewire.DType, int, *densewire.Error) {
	name, ok := "", false
	if i := field.Metadata.FindKey(KeyDType); i >= 0 {
		name, ok = field.Metadata.Values()[i], true
	} else if md := schema.Metadata(); md.FindKey(KeyDType) >= 0 {
		name, ok = md.Values()[md.FindKey(KeyDType)], true
	}
	var dtype densewire.DType
	if ok {
		dt, err := densewire.ParseDType(name)
		if err != nil {
			e := err.(*densewire.Error)
			e.Field = KeyDType
			return 0, 0, e
		}
		dtype = dt
	}
	switch typ := field.Type.(type) {
	case *arrow.FixedSizeListType:
		inferred := map[arrow.Type]densewire.DType{arrow.FLOAT32: densewire.Float32, arrow.FLOAT16: densewire.Float16,
			arrow.FLOAT64: densewire.Float64, arrow.INT8: densewire.Int8, arrow.UINT8: densewire.Uint8}[typ.Elem().ID()]
		if dtype == 0 {
			dtype = inferred
		}
		if dtype == 0 || dtype == densewire.Binary || !arrow.TypeEqual(typ.Elem(), itemType(dtype)) {
			return 0, 0, fail(densewire.InvalidField, Column, "column type "+typ.String()+" does not carry dtype "+dtype.String())
		}
		return dtype, int(typ.Len()), nil
	case *arrow.FixedSizeBinaryType:
		if dtype == 0 {
			dtype = densewire.Binary
		}
		if dtype != densewire.Binary {
			return 0, 0, fail(densewire.InvalidField, Column, "column type "+typ.String()+" does not carry dtype "+dtype.String())
		}
		d := 8 * typ.ByteWidth
		md := schema.Metadata()
		if i := md.FindKey(KeyDimensions); i >= 0 {
			v, err := strconv.Atoi(md.Values()[i])
			if err != nil || v < 0 || (v+7)/8 != typ.ByteWidth {
				return 0, 0, fail(densewire.InvalidField, KeyDimensions, KeyDimensions+" "+strconv.Quote(md.Values()[i])+
					" does not fit "+typ.String())
			}
			d = v
		}
		return dtype, d, nil
	}
	return 0, 0, fail(densewire.InvalidField, Column, "column type "+field.Type.String()+" is not a fixed-size list or binary")
}

// columnBytes returns the little-endian value bytes of one batch's column, honouring offsets.
func columnBytes(col arrow.Array, dtype densewire.DType, d int) ([]byte, *densewire.Error) {
	n := col.Len()
	switch c := col.(type) {
	case *array.FixedSizeBinary:
		rb := dtype.RowBytes(d)
		buf := c.Data().Buffers()[1]
		if rb > 0 && c.Data().Offset() > math.MaxInt/rb {
			return nil, fail(densewire.Malformed, Column, "column offset out of range")
		}
		start := c.Data().Offset() * rb
		if buf == nil {
			if n*rb == 0 {
				return []byte{}, nil
			}
			return nil, fail(densewire.Malformed, Column, "missing value buffer")
		}
		if b := buf.Bytes(); start >= 0 && start <= len(b) && (rb == 0 || n <= (len(b)-start)/rb) {
			return b[start : start+n*rb], nil
		}
	case *array.FixedSizeList:
		child := c.ListValues().Data()
		w := dtype.ItemSize()
		buf := child.Buffers()[1]
		if d > 0 && c.Data().Offset() > (math.MaxInt/w-child.Offset())/d {
			return nil, fail(densewire.Malformed, Column, "column offset out of range")
		}
		start := (child.Offset() + c.Data().Offset()*d) * w
		if buf == nil {
			if n*d == 0 {
				return []byte{}, nil
			}
			return nil, fail(densewire.Malformed, Column, "missing value buffer")
		}
		if child.NullN() > 0 {
			return nil, fail(densewire.InvalidField, Column, "the embedding items have nulls")
		}
		if b := buf.Bytes(); start >= 0 && start <= len(b) && (d == 0 || n <= (len(b)-start)/(d*w)) {
			return b[start : start+n*d*w], nil
		}
	default:
		return nil, fail(densewire.InvalidField, Column, "unexpected column array "+col.DataType().String())
	}
	return nil, fail(densewire.Malformed, Column, "value buffer shorter than the column")
}
