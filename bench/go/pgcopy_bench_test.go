package bench

import (
	"bytes"
	"strconv"
	"testing"

	densewire "github.com/densewire/densewire/go"
)

// PostgreSQL COPY streams (SPEC.md section 16) of the same 1000 x 1536 float32 tensor with int8
// ids, against the baseline a Go program writes without densewire: COPY ... FROM STDIN in text,
// each vector as a pgvector literal [v1,v2,...] of shortest float32 decimals (what pgvector's
// own text output prints), read back with strconv.ParseFloat.

var (
	copyCols = densewire.CopyColumns{Type: densewire.PgVector, IDType: densewire.PgInt8}
	copyIDs  = func() *densewire.CopyIDs {
		ids := &densewire.CopyIDs{Ints: make([]int64, rows)}
		for i := range ids.Ints {
			ids.Ints[i] = int64(i)
		}
		return ids
	}()
)

func textCopy() []byte {
	out := make([]byte, 0, rows*dims*12)
	for i := range rows {
		out = strconv.AppendInt(out, int64(i), 10)
		out = append(out, '\t', '[')
		for j, v := range flat[i*dims : (i+1)*dims] {
			if j > 0 {
				out = append(out, ',')
			}
			out = strconv.AppendFloat(out, float64(v), 'g', -1, 32)
		}
		out = append(out, ']', '\n')
	}
	return out
}

func BenchmarkCopy_Encode_TextBaseline(b *testing.B) {
	var out []byte
	for b.Loop() {
		out = textCopy()
	}
	report(b, len(out))
}

func BenchmarkCopy_Encode(b *testing.B) {
	var out []byte
	for b.Loop() {
		var err error
		out, err = densewire.EncodeCopy(tensor, copyCols, copyIDs)
		mustOK(b, err)
	}
	report(b, len(out))
}

func BenchmarkCopy_Encode_Halfvec(b *testing.B) {
	cols := copyCols
	cols.Type = densewire.PgHalfvec
	var out []byte
	for b.Loop() {
		var err error
		out, err = densewire.EncodeCopy(tensor, cols, copyIDs)
		mustOK(b, err)
	}
	report(b, len(out))
}

func BenchmarkCopy_Decode_TextBaseline(b *testing.B) {
	body := textCopy()
	for b.Loop() {
		ids := make([]int64, 0, rows)
		out := make([]float32, 0, rows*dims)
		for line := range bytes.Lines(body) {
			tab := bytes.IndexByte(line, '\t')
			id, err := strconv.ParseInt(string(line[:tab]), 10, 64)
			mustOK(b, err)
			ids = append(ids, id)
			vec := line[tab+2 : len(line)-2] // inside [ ]
			for item := range bytes.SplitSeq(vec, []byte{','}) {
				v, err := strconv.ParseFloat(string(item), 32)
				mustOK(b, err)
				out = append(out, float32(v))
			}
		}
		if len(out) != rows*dims || len(ids) != rows {
			b.Fatal("short parse")
		}
	}
	report(b, len(body))
}

func BenchmarkCopy_Decode(b *testing.B) {
	body, err := densewire.EncodeCopy(tensor, copyCols, copyIDs)
	mustOK(b, err)
	for b.Loop() {
		data, err := densewire.DecodeCopy(body, copyCols)
		mustOK(b, err)
		if data.Tensor.N != rows {
			b.Fatal("short decode")
		}
	}
	report(b, len(body))
}
