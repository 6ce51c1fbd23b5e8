package arrowipc

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	densewire "github.com/densewire/densewire/go"
)

// Metadata keys of ragged and sparse streams (SPEC.md 20.7).
const (
	KeyKind           = "densewire.kind"
	KeyVocabularySize = "densewire.vocabulary_size"
)

// kindStream reads a stream and checks its kind and embedding column (in section 10's order).
func kindStream(body []byte, kind string) (*arrow.Schema, arrow.Field, int, []arrow.RecordBatch, func(), *densewire.Error) {
	schema, batches, release, e := readStream(body)
	if e != nil {
		return nil, arrow.Field{}, 0, nil, nil, e
	}
	md := schema.Metadata()
	if i := md.FindKey(KeyKind); i < 0 || md.Values()[i] != kind {
		release()
		return nil, arrow.Field{}, 0, nil, nil, fail(densewire.InvalidField, KeyKind, "a "+kind+" stream has "+KeyKind+" "+kind)
	}
	idx := schema.FieldIndices(Column)
	if len(idx) != 1 {
		release()
		return nil, arrow.Field{}, 0, nil, nil, fail(densewire.InvalidField, Column, "the stream has no single column \"embedding\"")
	}
	for _, rec := range batches {
		if rec.Column(idx[0]).NullN() > 0 {
			release()
			return nil, arrow.Field{}, 0, nil, nil, fail(densewire.InvalidField, Column, "the embedding column has nulls")
		}
	}
	return schema, schema.Field(idx[0]), idx[0], batches, release, nil
}

// listParts returns a List array's offsets rebased to 0 and the [first, last) items of its values.
func listParts(c *array.List) ([]uint32, int, int, *densewire.Error) {
	offs := c.Offsets()
	if len(offs) != c.Len()+1 {
		return nil, 0, 0, fail(densewire.Malformed, Column, "list offsets shorter than the column")
	}
	out := make([]uint32, len(offs))
	for i, o := range offs {
		if o < offs[0] || (i > 0 && o < offs[i-1]) {
			return nil, 0, 0, fail(densewire.Malformed, Column, "list offsets decrease")
		}
		out[i] = uint32(o - offs[0])
	}
	return out, int(offs[0]), int(offs[len(offs)-1]), nil
}

// appendOffsets appends batch offsets (rebased) to the running ones.
func appendOffsets(all, batch []uint32) []uint32 {
	base := all[len(all)-1]
	for _, o := range batch[1:] {
		all = append(all, base+o)
	}
	return all
}

// DecodeRagged reads a ragged tensor's Arrow stream (SPEC.md 20.7): List<FixedSizeList<T, d>> (or
// List<FixedSizeBinary>), densewire.kind ragged. The rows alias arrow-go's buffers (one batch).
func DecodeRagged(body []byte) (t *densewire.RaggedTensor, meta *densewire.Meta, err error) {
	defer func() {
		if p := recover(); p != nil {
			t, meta, err = nil, nil, fail(densewire.Malformed, "", fmt.Sprint("invalid Arrow stream: ", p))
		}
	}()
	schema, field, col, batches, release, e := kindStream(body, "ragged")
	if e != nil {
		return nil, nil, e
	}
	defer release()
	lt, ok := field.Type.(*arrow.ListType)
	if !ok {
		return nil, nil, fail(densewire.InvalidField, Column, "column type "+field.Type.String()+" is not a List")
	}
	dtype, d, e := columnDType(schema, arrow.Field{Name: Column, Type: lt.Elem(), Metadata: field.Metadata})
	if e != nil {
		return nil, nil, e
	}
	rb := dtype.RowBytes(d)
	offsets := []uint32{0}
	var data []byte
	for _, rec := range batches {
		c, ok := rec.Column(col).(*array.List)
		if !ok {
			return nil, nil, fail(densewire.InvalidField, Column, "unexpected column array")
		}
		offs, first, last, e := listParts(c)
		if e != nil {
			return nil, nil, e
		}
		rows, e := columnBytes(c.ListValues(), dtype, d)
		if e != nil {
			return nil, nil, e
		}
		if last*rb > len(rows) {
			return nil, nil, fail(densewire.Malformed, Column, "list offsets past the rows")
		}
		if len(batches) == 1 {
			data = rows[first*rb : last*rb]
		} else {
			data = append(data, rows[first*rb:last*rb]...)
		}
		offsets = appendOffsets(offsets, offs)
	}
	t, nerr := densewire.NewRaggedTensor(dtype, d, offsets, data)
	if nerr != nil {
		return nil, nil, nerr
	}
	meta, e = kindMeta(schema)
	if e != nil {
		return nil, nil, e
	}
	return t, meta, nil
}

// DecodeSparse reads a sparse tensor's Arrow stream (SPEC.md 20.7): Struct<indices: List<UInt32>,
// values: List<T>>, densewire.kind sparse, the field's densewire.vocabulary_size.
func DecodeSparse(body []byte) (t *densewire.SparseTensor, meta *densewire.Meta, err error) {
	defer func() {
		if p := recover(); p != nil {
			t, meta, err = nil, nil, fail(densewire.Malformed, "", fmt.Sprint("invalid Arrow stream: ", p))
		}
	}()
	schema, field, col, batches, release, e := kindStream(body, "sparse")
	if e != nil {
		return nil, nil, e
	}
	defer release()
	st, ok := field.Type.(*arrow.StructType)
	var it, vt *arrow.ListType
	if ok && st.NumFields() == 2 && st.Field(0).Name == "indices" && st.Field(1).Name == "values" {
		it, _ = st.Field(0).Type.(*arrow.ListType)
		vt, _ = st.Field(1).Type.(*arrow.ListType)
	}
	if it == nil || vt == nil || !arrow.TypeEqual(it.Elem(), arrow.PrimitiveTypes.Uint32) {
		return nil, nil, fail(densewire.InvalidField, Column, "column type "+field.Type.String()+" is not Struct<indices: List<UInt32>, values: List<T>>")
	}
	var dtype densewire.DType
	name := ""
	if i := field.Metadata.FindKey(KeyDType); i >= 0 {
		name = field.Metadata.Values()[i]
	} else if md := schema.Metadata(); md.FindKey(KeyDType) >= 0 {
		name = md.Values()[md.FindKey(KeyDType)]
	}
	dt, perr := densewire.ParseDType(name)
	if perr != nil {
		e := perr.(*densewire.Error)
		e.Field = KeyDType
		return nil, nil, e
	}
	dtype = dt
	if _, err := densewire.NewSparseTensor(dtype, 1, []uint32{0}, nil, nil); err != nil {
		e := err.(*densewire.Error)
		e.Field = KeyDType
		return nil, nil, e
	}
	if !arrow.TypeEqual(vt.Elem(), itemType(dtype)) {
		return nil, nil, fail(densewire.InvalidField, Column, "column type "+field.Type.String()+" does not carry dtype "+dtype.String())
	}
	v := uint64(0)
	if i := field.Metadata.FindKey(KeyVocabularySize); i >= 0 {
		v, _ = strconv.ParseUint(field.Metadata.Values()[i], 10, 64)
	}
	if v < 1 || v > 1<<32 {
		return nil, nil, fail(densewire.InvalidField, KeyVocabularySize, KeyVocabularySize+" must be a decimal integer from 1 to 2^32")
	}
	size := dtype.ItemSize()
	offsets := []uint32{0}
	var indexBytes, data []byte
	for _, rec := range batches {
		s, ok := rec.Column(col).(*array.Struct)
		if !ok {
			return nil, nil, fail(densewire.InvalidField, Column, "unexpected column array")
		}
		il, ok1 := s.Field(0).(*array.List)
		vl, ok2 := s.Field(1).(*array.List)
		if !ok1 || !ok2 {
			return nil, nil, fail(densewire.InvalidField, Column, "unexpected column arrays")
		}
		io, ifirst, ilast, e := listParts(il)
		if e != nil {
			return nil, nil, e
		}
		vo, vfirst, vlast, e := listParts(vl)
		if e != nil {
			return nil, nil, e
		}
		for i := range io {
			if io[i] != vo[i] {
				return nil, nil, fail(densewire.ShapeMismatch, Column, "row "+strconv.Itoa(i-1)+": the indices and values lists differ in length")
			}
		}
		ib, e := primitiveBytes(il.ListValues(), 4, ifirst, ilast)
		if e != nil {
			return nil, nil, e
		}
		vb, e := primitiveBytes(vl.ListValues(), size, vfirst, vlast)
		if e != nil {
			return nil, nil, e
		}
		if len(batches) == 1 {
			indexBytes, data = ib, vb
		} else {
			indexBytes, data = append(indexBytes, ib...), append(data, vb...)
		}
		offsets = appendOffsets(offsets, io)
	}
	indices := make([]uint32, len(indexBytes)/4)
	for j := range indices {
		indices[j] = binary.LittleEndian.Uint32(indexBytes[4*j:])
	}
	t, nerr := densewire.NewSparseTensor(dtype, v, offsets, indices, data)
	if nerr != nil {
		return nil, nil, nerr
	}
	meta, e = kindMeta(schema)
	if e != nil {
		return nil, nil, e
	}
	return t, meta, nil
}

// primitiveBytes is items [first, last) of a primitive array of width-byte items.
func primitiveBytes(a arrow.Array, width, first, last int) ([]byte, *densewire.Error) {
	d := a.Data()
	if d.NullN() > 0 {
		return nil, fail(densewire.InvalidField, Column, "the embedding items have nulls")
	}
	if last == first {
		return []byte{}, nil
	}
	buf := d.Buffers()[1]
	start := (d.Offset() + first) * width
	end := (d.Offset() + last) * width
	if buf == nil || start < 0 || end > buf.Len() {
		return nil, fail(densewire.Malformed, Column, "value buffer shorter than the column")
	}
	return buf.Bytes()[start:end], nil
}

func kindMeta(schema *arrow.Schema) (*densewire.Meta, *densewire.Error) {
	md := schema.Metadata()
	i := md.FindKey(KeyModel)
	if i < 0 && md.FindKey(KeyPromptTokens) < 0 && md.FindKey(KeyTotalTokens) < 0 {
		return nil, nil
	}
	meta := &densewire.Meta{}
	if i >= 0 {
		meta.Model = md.Values()[i]
	}
	for key, dst := range map[string]*uint64{KeyPromptTokens: &meta.PromptTokens, KeyTotalTokens: &meta.TotalTokens} {
		if j := md.FindKey(key); j >= 0 {
			v, err := strconv.ParseUint(md.Values()[j], 10, 64)
			if err != nil {
				return nil, fail(densewire.InvalidField, key, key+" is not a count: "+strconv.Quote(md.Values()[j]))
			}
			*dst = v
		}
	}
	return meta, nil
}

func int32Offsets(offsets []uint32) (*memory.Buffer, *densewire.Error) {
	b := make([]byte, 4*len(offsets))
	for i, o := range offsets {
		if o > math.MaxInt32 {
			return nil, fail(densewire.InvalidField, "offsets", "Arrow lists hold at most 2^31-1 items")
		}
		binary.LittleEndian.PutUint32(b[4*i:], o)
	}
	return memory.NewBufferBytes(b), nil
}

func writeKind(kind string, dtype densewire.DType, dims uint64, typ arrow.DataType, fieldMD arrow.Metadata, column arrow.ArrayData, n int, meta *densewire.Meta) ([]byte, error) {
	keys := []string{KeyVersion, KeyKind, KeyDType, KeyDimensions}
	vals := []string{"1", kind, dtype.String(), strconv.FormatUint(dims, 10)}
	if meta != nil {
		keys = append(keys, KeyModel, KeyPromptTokens, KeyTotalTokens)
		vals = append(vals, meta.Model, strconv.FormatUint(meta.PromptTokens, 10), strconv.FormatUint(meta.TotalTokens, 10))
	}
	md := arrow.NewMetadata(keys, vals)
	schema := arrow.NewSchema([]arrow.Field{{Name: Column, Type: typ, Nullable: false, Metadata: fieldMD}}, &md)
	col := array.MakeFromData(column)
	defer col.Release()
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, int64(n))
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

// EncodeRagged returns the Arrow IPC stream of a ragged tensor (SPEC.md 20.7); the rows are handed
// to the writer without a copy.
func EncodeRagged(t *densewire.RaggedTensor, meta *densewire.Meta) ([]byte, error) {
	if _, err := densewire.NewRaggedTensor(t.DType, t.D, t.Offsets, t.Data); err != nil {
		return nil, err
	}
	if t.D > math.MaxInt32 {
		return nil, fail(densewire.InvalidField, "shape", "Arrow lists hold at most 2^31-1 items")
	}
	offs, e := int32Offsets(t.Offsets)
	if e != nil {
		return nil, e
	}
	rows := int(t.Offsets[t.N])
	elem := columnType(t.DType, t.D)
	values := memory.NewBufferBytes(t.Data)
	var items arrow.ArrayData
	if t.DType == densewire.Binary {
		items = array.NewData(elem, rows, []*memory.Buffer{nil, values}, nil, 0, 0)
	} else {
		child := array.NewData(itemType(t.DType), rows*t.D, []*memory.Buffer{nil, values}, nil, 0, 0)
		defer child.Release()
		items = array.NewData(elem, rows, []*memory.Buffer{nil}, []arrow.ArrayData{child}, 0, 0)
	}
	defer items.Release()
	typ := arrow.ListOfField(arrow.Field{Name: "item", Type: elem, Nullable: false})
	column := array.NewData(typ, t.N, []*memory.Buffer{nil, offs}, []arrow.ArrayData{items}, 0, 0)
	defer column.Release()
	return writeKind("ragged", t.DType, uint64(t.D), typ, arrow.NewMetadata([]string{KeyDType}, []string{t.DType.String()}), column, t.N, meta)
}

// EncodeSparse returns the Arrow IPC stream of a sparse tensor (SPEC.md 20.7).
func EncodeSparse(t *densewire.SparseTensor, meta *densewire.Meta) ([]byte, error) {
	if _, err := densewire.NewSparseTensor(t.DType, t.V, t.Offsets, t.Indices, t.Data); err != nil {
		return nil, err
	}
	offs, e := int32Offsets(t.Offsets)
	if e != nil {
		return nil, e
	}
	k := int(t.Offsets[t.N])
	ib := make([]byte, 4*k)
	for j, x := range t.Indices {
		binary.LittleEndian.PutUint32(ib[4*j:], x)
	}
	indexData := array.NewData(arrow.PrimitiveTypes.Uint32, k, []*memory.Buffer{nil, memory.NewBufferBytes(ib)}, nil, 0, 0)
	defer indexData.Release()
	valueData := array.NewData(itemType(t.DType), k, []*memory.Buffer{nil, memory.NewBufferBytes(t.Data)}, nil, 0, 0)
	defer valueData.Release()
	it := arrow.ListOfField(arrow.Field{Name: "item", Type: arrow.PrimitiveTypes.Uint32, Nullable: false})
	vt := arrow.ListOfField(arrow.Field{Name: "item", Type: itemType(t.DType), Nullable: false})
	il := array.NewData(it, t.N, []*memory.Buffer{nil, offs}, []arrow.ArrayData{indexData}, 0, 0)
	defer il.Release()
	vl := array.NewData(vt, t.N, []*memory.Buffer{nil, offs}, []arrow.ArrayData{valueData}, 0, 0)
	defer vl.Release()
	typ := arrow.StructOf(arrow.Field{Name: "indices", Type: it, Nullable: false}, arrow.Field{Name: "values", Type: vt, Nullable: false})
	column := array.NewData(typ, t.N, []*memory.Buffer{nil}, []arrow.ArrayData{il, vl}, 0, 0)
	defer column.Release()
	fieldMD := arrow.NewMetadata([]string{KeyDType, KeyVocabularySize}, []string{t.DType.String(), strconv.FormatUint(t.V, 10)})
	return writeKind("sparse", t.DType, t.V, typ, fieldMD, column, t.N, meta)
}
