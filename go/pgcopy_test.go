package densewire_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	densewire "github.com/densewire/densewire/go"
)

// PostgreSQL binary COPY (SPEC.md section 16): the golden cases of pgcopy.json (run by TestGolden)
// and unit tests of what they do not cover.

// pgcopyColumns are the COPY columns a golden case names: [id,] vector.
func pgcopyColumns(t testing.TB, c *goldenCase) densewire.CopyColumns {
	t.Helper()
	switch len(c.Columns) {
	case 1:
		return densewire.CopyColumns{Type: densewire.PgType(c.Columns[0].Type), Column: c.Columns[0].Name}
	case 2:
		return densewire.CopyColumns{Type: densewire.PgType(c.Columns[1].Type), Column: c.Columns[1].Name,
			IDType: densewire.PgIDType(c.Columns[0].Type), IDColumn: c.Columns[0].Name}
	}
	t.Fatalf("case has %d columns", len(c.Columns))
	return densewire.CopyColumns{}
}

// pgcopyIDs are a case's ids (decimal strings, text, canonical uuids; nil for NULL) as CopyIDs.
func pgcopyIDs(t testing.TB, c *goldenCase, idType densewire.PgIDType) *densewire.CopyIDs {
	t.Helper()
	if idType == densewire.PgNoID {
		return nil
	}
	ids := &densewire.CopyIDs{}
	for i, s := range c.IDs {
		if s == nil {
			if ids.Nulls == nil {
				ids.Nulls = make([]bool, len(c.IDs))
			}
			ids.Nulls[i] = true
		}
		switch idType {
		case densewire.PgInt8, densewire.PgInt4:
			var v int64
			if s != nil {
				var err error
				if v, err = strconv.ParseInt(*s, 10, 64); err != nil {
					t.Fatal(err)
				}
			}
			ids.Ints = append(ids.Ints, v)
		case densewire.PgText:
			ids.Texts = append(ids.Texts, deref(s))
		case densewire.PgUUID:
			var u [16]byte
			if s != nil {
				var ok bool
				if u, ok = densewire.ParseUUID(*s); !ok {
					t.Fatalf("bad uuid %q", *s)
				}
			}
			ids.UUIDs = append(ids.UUIDs, u)
		}
	}
	if ids.Ints == nil && ids.Texts == nil && ids.UUIDs == nil { // an empty batch
		switch idType {
		case densewire.PgInt8, densewire.PgInt4:
			ids.Ints = []int64{}
		case densewire.PgText:
			ids.Texts = []string{}
		case densewire.PgUUID:
			ids.UUIDs = [][16]byte{}
		}
	}
	return ids
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// sameIDs compares decoded ids with the expected ones, NULLs by their flag only.
func sameIDs(t testing.TB, got, want *densewire.CopyIDs, n int) {
	t.Helper()
	if (got == nil) != (want == nil) {
		t.Fatalf("ids %+v, want %+v", got, want)
	}
	if got == nil {
		return
	}
	if len(got.Ints) != len(want.Ints) || len(got.Texts) != len(want.Texts) || len(got.UUIDs) != len(want.UUIDs) {
		t.Fatalf("ids %+v, want %+v", got, want)
	}
	if slices.Contains(want.Nulls, true) != (got.Nulls != nil) {
		t.Fatalf("NULL flags %v, want %v", got.Nulls, want.Nulls)
	}
	for i := range n {
		if got.Null(i) != want.Null(i) {
			t.Fatalf("id %d: NULL %v, want %v", i, got.Null(i), want.Null(i))
		}
		if want.Null(i) {
			continue
		}
		switch {
		case want.Ints != nil && got.Ints[i] != want.Ints[i],
			want.Texts != nil && got.Texts[i] != want.Texts[i],
			want.UUIDs != nil && got.UUIDs[i] != want.UUIDs[i]:
			t.Fatalf("id %d: %+v, want %+v", i, got, want)
		}
	}
}

func checkPgcopy(t *testing.T, c *goldenCase) {
	cols := pgcopyColumns(t, c)
	if string(cols.Type) != c.PgType {
		t.Fatalf("pg_type %s, columns %+v", c.PgType, c.Columns)
	}
	input := expected(t, c)
	ids := pgcopyIDs(t, c, cols.IDType)
	stream := mustHex(t, *c.EncodedHex)

	enc, err := densewire.EncodeCopy(input, cols, ids)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(enc, stream) {
		t.Fatalf("encode:\n got %x\nwant %x", enc, stream)
	}
	// the same stream in pieces: header + tuples + trailer, and the CopyReader by 1 and 2 rows
	tuples, err := densewire.AppendCopyTuples([]byte(densewire.CopyHeader), input, cols, ids, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := append(tuples, densewire.CopyTrailer...); !bytes.Equal(got, stream) {
		t.Fatalf("AppendCopyTuples:\n got %x\nwant %x", got, stream)
	}
	for _, chunk := range []int{1, 2} {
		got, err := io.ReadAll(densewire.NewCopyReader(input, cols, ids, chunk))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, stream) {
			t.Fatalf("CopyReader by %d rows:\n got %x\nwant %x", chunk, got, stream)
		}
	}

	cols.Dims = c.Shape[1]
	data, err := densewire.DecodeCopy(stream, cols)
	if err != nil {
		t.Fatal(err)
	}
	want, err := densewire.NewTensor(mustDType(t, c.ValueDType), c.Shape[0], c.Shape[1], itemsLE(t, c.Values))
	if err != nil {
		t.Fatal(err)
	}
	sameTensor(t, "decode", data.Tensor, want)
	sameIDs(t, data.IDs, ids, c.Shape[0])
}

func checkInvalidPgcopy(t *testing.T, c *goldenCase) {
	cols := pgcopyColumns(t, c)
	switch c.Direction {
	case "decode":
		_, err := densewire.DecodeCopy(mustHex(t, *c.InputHex), cols)
		checkCaseError(t, c, err)
	case "encode":
		input := expected(t, c)
		ids := pgcopyIDs(t, c, cols.IDType)
		_, err := densewire.EncodeCopy(input, cols, ids)
		checkCaseError(t, c, err)
		// the streaming writer gives the same error, and no byte of a tuple before it
		got, err := io.ReadAll(densewire.NewCopyReader(input, cols, ids, 1000))
		checkCaseError(t, c, err)
		if string(got) != densewire.CopyHeader {
			t.Fatalf("CopyReader wrote %x before failing", got)
		}
	default:
		t.Fatalf("unknown direction %q", c.Direction)
	}
}

// randomVectors is an (n, d) float32 tensor of values in [-1, 1).
func randomVectors(t testing.TB, n, d int, seed uint64) *densewire.Tensor {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	v := make([]float32, n*d)
	for i := range v {
		v[i] = rng.Float32()*2 - 1
	}
	tensor, err := densewire.FromFloat32(v, n, d, densewire.Float32)
	if err != nil {
		t.Fatal(err)
	}
	return tensor
}

func TestCopyRoundTripEveryType(t *testing.T) {
	src := randomVectors(t, 37, 13, 7)
	v, _ := src.Float32()
	for i := range v { // zeros for the sparse rows, and for sign bits
		if i%3 == 0 {
			v[i] = 0
		}
	}
	src, _ = densewire.FromFloat32(v, 37, 13, densewire.Float32)
	ids := &densewire.CopyIDs{Ints: make([]int64, 37), Nulls: make([]bool, 37)}
	for i := range ids.Ints {
		ids.Ints[i] = int64(i*1_000_003) - 5
		ids.Nulls[i] = i%5 == 4
	}
	for _, typ := range []densewire.PgType{densewire.PgVector, densewire.PgHalfvec, densewire.PgBit, densewire.PgSparsevec} {
		t.Run(string(typ), func(t *testing.T) {
			cols := densewire.CopyColumns{Type: typ, IDType: densewire.PgInt8}
			stream, err := densewire.EncodeCopy(src, cols, ids)
			if err != nil {
				t.Fatal(err)
			}
			got, err := densewire.DecodeCopy(stream, cols)
			if err != nil {
				t.Fatal(err)
			}
			want, err := densewire.FromFloat32(v, 37, 13, typ.DType())
			if err != nil {
				t.Fatal(err)
			}
			sameTensor(t, "round trip", got.Tensor, want)
			sameIDs(t, got.IDs, ids, 37)
		})
	}
}

func TestCopyTextAndUUIDIDsRoundTrip(t *testing.T) {
	src := randomVectors(t, 4, 3, 8)
	for _, tc := range []struct {
		typ densewire.PgIDType
		ids *densewire.CopyIDs
	}{
		{densewire.PgText, &densewire.CopyIDs{Texts: []string{"", "é", "a longer id than the others", "x"}, Nulls: []bool{false, false, false, true}}},
		{densewire.PgUUID, &densewire.CopyIDs{UUIDs: [][16]byte{{1}, {2, 3}, {15: 0xff}, {}}}},
		{densewire.PgInt4, &densewire.CopyIDs{Ints: []int64{math.MinInt32, -1, 0, math.MaxInt32}}},
	} {
		cols := densewire.CopyColumns{IDType: tc.typ, IDColumn: "doc"}
		stream, err := densewire.EncodeCopy(src, cols, tc.ids)
		if err != nil {
			t.Fatal(err)
		}
		got, err := densewire.DecodeCopy(stream, cols)
		if err != nil {
			t.Fatal(err)
		}
		sameTensor(t, string(tc.typ), got.Tensor, src)
		sameIDs(t, got.IDs, tc.ids, 4)
	}
}

// The writer is byte for byte the stream the spec describes: one tuple written by hand.
func TestCopyTupleLayoutByHand(t *testing.T) {
	src, _ := densewire.FromFloat32([]float32{1, -2}, 1, 2, densewire.Float32)
	stream, err := densewire.EncodeCopy(src, densewire.CopyColumns{IDType: densewire.PgInt4}, &densewire.CopyIDs{Ints: []int64{-3}})
	if err != nil {
		t.Fatal(err)
	}
	var want []byte
	want = append(want, "PGCOPY\n\xff\r\n\x00"...)
	want = binary.BigEndian.AppendUint32(want, 0)
	want = binary.BigEndian.AppendUint32(want, 0)
	want = binary.BigEndian.AppendUint16(want, 2)
	want = binary.BigEndian.AppendUint32(want, 4)
	want = binary.BigEndian.AppendUint32(want, 0xfffffffd)
	want = binary.BigEndian.AppendUint32(want, 4+8)
	want = binary.BigEndian.AppendUint16(want, 2)
	want = binary.BigEndian.AppendUint16(want, 0)
	want = binary.BigEndian.AppendUint32(want, math.Float32bits(1))
	want = binary.BigEndian.AppendUint32(want, math.Float32bits(-2))
	want = append(want, 0xff, 0xff)
	if !bytes.Equal(stream, want) {
		t.Fatalf("\n got %x\nwant %x", stream, want)
	}
}

func TestCopyEncodeErrors(t *testing.T) {
	src := randomVectors(t, 3, 2, 9)
	for _, tc := range []struct {
		name  string
		t     *densewire.Tensor
		cols  densewire.CopyColumns
		ids   *densewire.CopyIDs
		cat   densewire.Category
		field string
	}{
		{"no ids", src, densewire.CopyColumns{IDType: densewire.PgInt8}, nil, densewire.InvalidField, "id"},
		{"too few ids", src, densewire.CopyColumns{IDType: densewire.PgInt8}, &densewire.CopyIDs{Ints: []int64{1}}, densewire.ShapeMismatch, "id"},
		{"ids of the wrong kind", src, densewire.CopyColumns{IDType: densewire.PgText}, &densewire.CopyIDs{Ints: []int64{1, 2, 3}}, densewire.ShapeMismatch, "id"},
		{"null flags", src, densewire.CopyColumns{IDType: densewire.PgInt8}, &densewire.CopyIDs{Ints: []int64{1, 2, 3}, Nulls: []bool{true}}, densewire.ShapeMismatch, "id"},
		{"text not utf-8", src, densewire.CopyColumns{IDType: densewire.PgText, IDColumn: "doc"}, &densewire.CopyIDs{Texts: []string{"a", "b", "\xff"}}, densewire.InvalidField, "doc[2]"},
		{"text with NUL", src, densewire.CopyColumns{IDType: densewire.PgText}, &densewire.CopyIDs{Texts: []string{"a\x00", "b", "c"}}, densewire.InvalidField, "id[0]"},
		{"int4 below range", src, densewire.CopyColumns{IDType: densewire.PgInt4}, &densewire.CopyIDs{Ints: []int64{1, math.MinInt32 - 1, 3}}, densewire.InvalidField, "id[1]"},
		{"unknown type", src, densewire.CopyColumns{Type: "vec"}, nil, densewire.InvalidField, "embedding"},
		{"unknown id type", src, densewire.CopyColumns{IDType: "serial", IDColumn: "k"}, nil, densewire.InvalidField, "k"},
		{"int8 into vector", &densewire.Tensor{DType: densewire.Int8, N: 1, D: 2, Data: []byte{1, 2}}, densewire.CopyColumns{}, nil, densewire.InvalidField, "embedding"},
		{"too many dims", &densewire.Tensor{DType: densewire.Float16, N: 0, D: 16001, Data: []byte{}}, densewire.CopyColumns{Type: densewire.PgHalfvec}, nil, densewire.InvalidField, "embedding"},
		{"short data", &densewire.Tensor{DType: densewire.Float32, N: 2, D: 2, Data: make([]byte, 12)}, densewire.CopyColumns{}, nil, densewire.LengthMismatch, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := densewire.EncodeCopy(tc.t, tc.cols, tc.ids)
			var e *densewire.Error
			if !errors.As(err, &e) || e.Category != tc.cat || e.Field != tc.field {
				t.Fatalf("error %v, want %s on %q", err, tc.cat, tc.field)
			}
		})
	}
}

func TestCopyNullIDsIgnoreTheirValue(t *testing.T) {
	src := randomVectors(t, 2, 2, 10)
	cols := densewire.CopyColumns{IDType: densewire.PgInt4}
	// a NULL row's value is not written, so it need not be in range
	_, err := densewire.EncodeCopy(src, cols, &densewire.CopyIDs{Ints: []int64{math.MaxInt64, 1}, Nulls: []bool{true, false}})
	if err != nil {
		t.Fatal(err)
	}
}

func TestCopySparseNonZeroLimit(t *testing.T) {
	v := make([]float32, 2*16001)
	for i := range 16001 {
		v[16001+i] = 1
	}
	src, _ := densewire.FromFloat32(v, 2, 16001, densewire.Float32)
	_, err := densewire.EncodeCopy(src, densewire.CopyColumns{Type: densewire.PgSparsevec}, nil)
	var e *densewire.Error
	if !errors.As(err, &e) || e.Category != densewire.InvalidField || e.Field != "embedding[1]" {
		t.Fatalf("error %v, want invalid_field on embedding[1]", err)
	}
}

// A streamed COPY numbers rows across chunks and fails in the chunk of the bad row, after the
// chunks before it.
func TestCopyReaderErrorInALaterChunk(t *testing.T) {
	src := randomVectors(t, 10, 3, 11)
	binary.LittleEndian.PutUint32(src.Data[4*(7*3+1):], math.Float32bits(float32(math.NaN())))
	r := densewire.NewCopyReader(src, densewire.CopyColumns{}, nil, 4)
	got, err := io.ReadAll(r)
	var e *densewire.Error
	if !errors.As(err, &e) || e.Category != densewire.NonFinite || e.Field != "embedding[7][1]" {
		t.Fatalf("error %v, want non_finite on embedding[7][1]", err)
	}
	ok, _ := densewire.EncodeCopy(src.Clone(), densewire.CopyColumns{}, nil) // fails: the whole input is checked first
	if ok != nil {
		t.Fatal("EncodeCopy wrote a stream with a NaN")
	}
	if r.Rows() != 4 || len(got) != len(densewire.CopyHeader)+4*(2+4+4+12) || r.Bytes() != int64(len(got)) {
		t.Fatalf("read %d bytes, %d rows before the error", len(got), r.Rows())
	}
}

// The reader copies: the tensor does not alias the stream.
func TestCopyDecodeOwnsItsData(t *testing.T) {
	src := randomVectors(t, 3, 4, 12)
	stream, _ := densewire.EncodeCopy(src, densewire.CopyColumns{}, nil)
	got, err := densewire.DecodeCopy(stream, densewire.CopyColumns{})
	if err != nil {
		t.Fatal(err)
	}
	clear(stream)
	sameTensor(t, "after clearing the stream", got.Tensor, src)
}

func TestCopyDecodeHeaderExtensionAndUpperFlags(t *testing.T) {
	src := randomVectors(t, 2, 2, 13)
	stream, _ := densewire.EncodeCopy(src, densewire.CopyColumns{}, nil)
	// flags bits 17 to 31 are ignored; a header extension is skipped
	var b []byte
	b = append(b, densewire.CopySignature...)
	b = binary.BigEndian.AppendUint32(b, 0xfffe0000)
	b = binary.BigEndian.AppendUint32(b, 3)
	b = append(b, "abc"...)
	b = append(b, stream[19:]...)
	got, err := densewire.DecodeCopy(b, densewire.CopyColumns{})
	if err != nil {
		t.Fatal(err)
	}
	sameTensor(t, "decode", got.Tensor, src)
	// an extension longer than the stream is truncated at the stream's length
	b = binary.BigEndian.AppendUint32(append([]byte(densewire.CopySignature), 0, 0, 0, 0), 100)
	_, err = densewire.DecodeCopy(b, densewire.CopyColumns{})
	var e *densewire.Error
	if !errors.As(err, &e) || e.Category != densewire.Truncated || e.Offset != len(b) {
		t.Fatalf("error %v, want truncated at %d", err, len(b))
	}
}

// Every prefix of a valid stream fails with truncated at its length (or malformed at 0 for a cut
// signature that still matches: none does), never a panic.
func TestCopyDecodeEveryPrefix(t *testing.T) {
	src := randomVectors(t, 3, 2, 14)
	for _, cols := range []densewire.CopyColumns{
		{IDType: densewire.PgText},
		{Type: densewire.PgSparsevec, IDType: densewire.PgUUID},
		{Type: densewire.PgBit, IDType: densewire.PgInt4},
	} {
		var ids *densewire.CopyIDs
		switch cols.IDType {
		case densewire.PgText:
			ids = &densewire.CopyIDs{Texts: []string{"a", "bb", "ccc"}}
		case densewire.PgUUID:
			ids = &densewire.CopyIDs{UUIDs: make([][16]byte, 3)}
		default:
			ids = &densewire.CopyIDs{Ints: []int64{1, 2, 3}}
		}
		stream, err := densewire.EncodeCopy(src, cols, ids)
		if err != nil {
			t.Fatal(err)
		}
		for k := range len(stream) {
			_, err := densewire.DecodeCopy(stream[:k], cols)
			var e *densewire.Error
			if !errors.As(err, &e) || e.Category != densewire.Truncated || e.Offset != k {
				t.Fatalf("%v: prefix of %d bytes: %v, want truncated at %d", cols, k, err, k)
			}
		}
	}
}

func TestCopySQL(t *testing.T) {
	cols := densewire.CopyColumns{IDType: densewire.PgInt8, IDColumn: `doc"id`}
	if got := densewire.CopyFromSQL("public.items", cols); got != `COPY "public"."items" ("doc""id", "embedding") FROM STDIN (FORMAT BINARY)` {
		t.Errorf("CopyFromSQL: %s", got)
	}
	if got := densewire.CopyToSQL(`"My Table"`, densewire.CopyColumns{Column: "v"}); got != `COPY "My Table" ("v") TO STDOUT (FORMAT BINARY)` {
		t.Errorf("CopyToSQL: %s", got)
	}
}

func FuzzDecodeCopy(f *testing.F) {
	src := randomVectors(f, 2, 3, 15)
	for _, cols := range []densewire.CopyColumns{{}, {Type: densewire.PgSparsevec, IDType: densewire.PgText}, {Type: densewire.PgBit}, {Type: densewire.PgHalfvec, IDType: densewire.PgUUID}} {
		var ids *densewire.CopyIDs
		switch cols.IDType {
		case densewire.PgText:
			ids = &densewire.CopyIDs{Texts: []string{"a", ""}}
		case densewire.PgUUID:
			ids = &densewire.CopyIDs{UUIDs: make([][16]byte, 2)}
		}
		stream, err := densewire.EncodeCopy(src, cols, ids)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(stream, uint8(0))
	}
	f.Add([]byte(densewire.CopyHeader+densewire.CopyTrailer), uint8(1))
	types := []densewire.PgType{densewire.PgVector, densewire.PgHalfvec, densewire.PgBit, densewire.PgSparsevec}
	idTypes := []densewire.PgIDType{densewire.PgNoID, densewire.PgInt8, densewire.PgInt4, densewire.PgText, densewire.PgUUID}
	f.Fuzz(func(t *testing.T, data []byte, which uint8) {
		// MaxDenseBytes: a sparsevec header of a few bytes may stand for 64 MiB of zeros under the
		// default bound; 1 MiB keeps each input cheap (the bound itself is
		// TestCopyDecodeSparseAmplificationBound's).
		cols := densewire.CopyColumns{Type: types[int(which)%4], IDType: idTypes[int(which/4)%5], MaxDenseBytes: 1 << 20}
		got, err := densewire.DecodeCopy(data, cols)
		if err != nil {
			var e *densewire.Error
			if !errors.As(err, &e) || e.Offset < 0 || e.Offset > len(data) {
				t.Fatalf("error %v (offset out of the stream)", err)
			}
			return
		}
		// a stream that decodes re-encodes to itself when it was canonical; at least it round-trips
		if cols.Type == densewire.PgBit || got.Tensor.N == 0 {
			return
		}
		again, err := densewire.EncodeCopy(got.Tensor, cols, got.IDs)
		if err != nil {
			if errors.Is(err, densewire.NonFinite) || errors.Is(err, densewire.InvalidField) {
				return // NaN or a NUL in a text: a reader carries what a writer refuses
			}
			t.Fatal(err)
		}
		back, err := densewire.DecodeCopy(again, cols)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(back.Tensor.Data, got.Tensor.Data) {
			t.Fatal("re-encoding changed the values")
		}
	})
}

// A sparsevec of 10^9 dimensions is 28 bytes of stream and 4 GB of dense values: refused, not
// allocated.
func TestCopyDecodeSparseAmplificationBound(t *testing.T) {
	var b []byte
	b = append(b, densewire.CopyHeader...)
	b = binary.BigEndian.AppendUint16(b, 1)
	b = binary.BigEndian.AppendUint32(b, 12)
	b = binary.BigEndian.AppendUint32(b, 1_000_000_000)
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint32(b, 0)
	b = append(b, 0xff, 0xff)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := densewire.DecodeCopy(b, densewire.CopyColumns{Type: densewire.PgSparsevec})
	runtime.ReadMemStats(&after)
	var e *densewire.Error
	if !errors.As(err, &e) || e.Category != densewire.InvalidField || e.Field != "embedding" || e.Offset != 25 {
		t.Fatalf("error %v, want invalid_field on embedding at 25", err)
	}
	// refused before anything of the dense row's size is allocated (the first row's buffer was
	// once made before the check: 4 GB here, and the fuzz workers ran out of memory)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Fatalf("decoding the refused stream allocated %d bytes", grew)
	}
	// a sparsevec(30522) row, SPLADE's vocabulary, is within the bound
	b = append(b[:len(densewire.CopyHeader)+6], 0, 0, 0x77, 0x3a, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff)
	got, err := densewire.DecodeCopy(b, densewire.CopyColumns{Type: densewire.PgSparsevec})
	if err != nil || got.Tensor.D != 30522 || got.Tensor.N != 1 {
		t.Fatalf("%v %+v", err, got)
	}
	// the same row over a caller's own bound (122,088 dense bytes > 100,000)
	_, err = densewire.DecodeCopy(b, densewire.CopyColumns{Type: densewire.PgSparsevec, MaxDenseBytes: 100_000})
	if !errors.As(err, &e) || e.Category != densewire.InvalidField || !strings.Contains(e.Error(), "MaxDenseBytes") {
		t.Fatalf("error %v, want invalid_field naming MaxDenseBytes", err)
	}
}
