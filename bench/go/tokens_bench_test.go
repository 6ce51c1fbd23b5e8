package bench

// Per-token and sparse output (issue 32 item 6, SPEC.md 20): the client-side decode of 100 documents
// x 256 tokens x 384 float32 (MiniLM's token-state shape, 39.3 MB of floats) as densewire's ragged
// raw, Arrow, MessagePack and Protobuf bodies against TEI's /embed_all JSON ([[[f32]]]) read by
// encoding/json into [][][]float32; and 100 sparse vectors of 200 non-zeros over a vocabulary of
// 30,522 (SPLADE's BERT vocabulary) against TEI's /embed_sparse JSON ([[{"index", "value"}]]) into
// [][]struct{Index; Value}. Run from bench/go (rounds interleaved by run.sh):
//
//	BENCH='^Benchmark(Tokens|Sparse)_' OUT=results_tokens.txt ROUNDS=7 ./run.sh
//
// The values are the same synthetic ones in every language's bench (bench/RESULTS-tokens.md):
// entry e is float32(k)/99991 - 0.5 with k = (e mod 100000) * 35761 mod 100000, computed in
// float32; TEI's JSON holds their shortest float32 decimals (as TEI's serde writes them).

import (
	"encoding/json"
	"net/http"
	"sync"
	"testing"

	densewire "github.com/densewire/densewire/go"
	"github.com/densewire/densewire/go/arrowipc"
)

const tokDocs, tokTokens, tokDims = 100, 256, 384
const spDocs, spNNZ, spVocab = 100, 200, 30522

func tokValue(e int) float32 { return float32((e%100000)*35761%100000)/float32(99991) - 0.5 }
func spValue(e int) float32  { return float32((e%100000)*35761%100000) / float32(99991) * 3 }

// spIndex is entry j of vector i: strictly ascending in j, below spVocab.
func spIndex(i, j int) uint32 { return uint32(j*150 + (i*7)%150) }

type teiSparse struct {
	Index uint32  `json:"index"`
	Value float32 `json:"value"`
}

// tokenBodies are one ragged batch in TEI's JSON and densewire's formats.
type tokenBodies struct {
	tei, raw, arrow, msgpack, protobuf []byte
	rawHeader                          http.Header
	want                               *densewire.RaggedTensor
}

func makeTokenBodies(docs, tokens, d int) (*tokenBodies, error) {
	values := make([]float32, docs*tokens*d)
	for e := range values {
		values[e] = tokValue(e)
	}
	nested := make([][][]float32, docs)
	offsets := make([]uint32, docs+1)
	for i := range nested {
		nested[i] = make([][]float32, tokens)
		for t := range nested[i] {
			at := (i*tokens + t) * d
			nested[i][t] = values[at : at+d]
		}
		offsets[i+1] = uint32((i + 1) * tokens)
	}
	rt, err := densewire.NewRaggedTensor(densewire.Float32, d, offsets, densewire.Float32Bytes(values))
	if err != nil {
		return nil, err
	}
	b := &tokenBodies{rawHeader: http.Header{}, want: rt}
	if b.tei, err = json.Marshal(nested); err != nil {
		return nil, err
	}
	b.raw = densewire.EncodeRaggedRaw(b.rawHeader, rt, meta)
	if b.arrow, err = arrowipc.EncodeRagged(rt, meta); err != nil {
		return nil, err
	}
	b.msgpack = densewire.EncodeRaggedMsgpack(rt, meta)
	b.protobuf = densewire.EncodeRaggedProtobuf(rt, meta)
	return b, nil
}

// sparseBodies are one sparse batch in TEI's JSON and densewire's formats.
type sparseBodies struct {
	tei, raw, arrow, msgpack, protobuf []byte
	rawHeader                          http.Header
	want                               *densewire.SparseTensor
}

func makeSparseBodies(docs, nnz int) (*sparseBodies, error) {
	nested := make([][]teiSparse, docs)
	offsets := make([]uint32, docs+1)
	indices := make([]uint32, 0, docs*nnz)
	values := make([]float32, 0, docs*nnz)
	for i := range nested {
		nested[i] = make([]teiSparse, nnz)
		for j := range nested[i] {
			e := i*nnz + j
			nested[i][j] = teiSparse{spIndex(i, j), spValue(e)}
			indices = append(indices, spIndex(i, j))
			values = append(values, spValue(e))
		}
		offsets[i+1] = uint32((i + 1) * nnz)
	}
	st, err := densewire.NewSparseTensor(densewire.Float32, spVocab, offsets, indices, densewire.Float32Bytes(values))
	if err != nil {
		return nil, err
	}
	b := &sparseBodies{rawHeader: http.Header{}, want: st}
	if b.tei, err = json.Marshal(nested); err != nil {
		return nil, err
	}
	b.raw = densewire.EncodeSparseRaw(b.rawHeader, st, meta)
	if b.arrow, err = arrowipc.EncodeSparse(st, meta); err != nil {
		return nil, err
	}
	b.msgpack = densewire.EncodeSparseMsgpack(st, meta)
	b.protobuf = densewire.EncodeSparseProtobuf(st, meta)
	return b, nil
}

// The decoders measured, each ending with the rows (or indices and values) in hand as a client
// uses them: TEI's nested slices, densewire's one buffer viewed as []float32.
func decodeTEITokens(body []byte) ([][][]float32, error) {
	var m [][][]float32
	err := json.Unmarshal(body, &m)
	return m, err
}

func decodeTEISparse(body []byte) ([][]teiSparse, error) {
	var m [][]teiSparse
	err := json.Unmarshal(body, &m)
	return m, err
}

var raggedDecoders = map[string]func(b *tokenBodies) (*densewire.RaggedTensor, error){
	"Raw": func(b *tokenBodies) (*densewire.RaggedTensor, error) {
		t, _, err := densewire.DecodeRaggedRaw(b.rawHeader, b.raw)
		return t, err
	},
	"Arrow": func(b *tokenBodies) (*densewire.RaggedTensor, error) {
		t, _, err := arrowipc.DecodeRagged(b.arrow)
		return t, err
	},
	"Msgpack": func(b *tokenBodies) (*densewire.RaggedTensor, error) {
		t, _, err := densewire.DecodeRaggedMsgpack(b.msgpack)
		return t, err
	},
	"Protobuf": func(b *tokenBodies) (*densewire.RaggedTensor, error) {
		t, _, err := densewire.DecodeRaggedProtobuf(b.protobuf, true)
		return t, err
	},
}

var sparseDecoders = map[string]func(b *sparseBodies) (*densewire.SparseTensor, error){
	"Raw": func(b *sparseBodies) (*densewire.SparseTensor, error) {
		t, _, err := densewire.DecodeSparseRaw(b.rawHeader, b.raw)
		return t, err
	},
	"Arrow": func(b *sparseBodies) (*densewire.SparseTensor, error) {
		t, _, err := arrowipc.DecodeSparse(b.arrow)
		return t, err
	},
	"Msgpack": func(b *sparseBodies) (*densewire.SparseTensor, error) {
		t, _, err := densewire.DecodeSparseMsgpack(b.msgpack)
		return t, err
	},
	"Protobuf": func(b *sparseBodies) (*densewire.SparseTensor, error) {
		t, _, err := densewire.DecodeSparseProtobuf(b.protobuf, true)
		return t, err
	},
}

// TestTokenBodiesAgree checks, on a small batch, that every body the benchmarks decode holds the same
// numbers as TEI's JSON, bit for bit (CI runs it; the benchmarks use the full size).
func TestTokenBodiesAgree(t *testing.T) {
	b, err := makeTokenBodies(3, 5, 7)
	if err != nil {
		t.Fatal(err)
	}
	tei, err := decodeTEITokens(b.tei)
	if err != nil {
		t.Fatal(err)
	}
	for name, dec := range raggedDecoders {
		rt, err := dec(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if rt.N != 3 || rt.D != 7 {
			t.Fatalf("%s: %d x %d", name, rt.N, rt.D)
		}
		for i := range tei {
			got, err := rt.Matrix(i).Float32()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			for r, row := range tei[i] {
				for j, v := range row {
					if got[r*7+j] != v {
						t.Fatalf("%s: [%d][%d][%d] = %v, TEI's JSON %v", name, i, r, j, got[r*7+j], v)
					}
				}
			}
		}
	}
	s, err := makeSparseBodies(4, 6)
	if err != nil {
		t.Fatal(err)
	}
	teiS, err := decodeTEISparse(s.tei)
	if err != nil {
		t.Fatal(err)
	}
	for name, dec := range sparseDecoders {
		st, err := dec(s)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if st.N != 4 || st.V != spVocab {
			t.Fatalf("%s: %d vectors over %d", name, st.N, st.V)
		}
		for i := range teiS {
			idx, data := st.Vector(i)
			vt, err := densewire.NewTensor(densewire.Float32, len(idx), 1, data)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			vals, err := vt.Float32()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			for j, e := range teiS[i] {
				if idx[j] != e.Index || vals[j] != e.Value {
					t.Fatalf("%s: vector %d entry %d = (%d, %v), TEI's JSON (%d, %v)", name, i, j, idx[j], vals[j], e.Index, e.Value)
				}
			}
		}
	}
}

var (
	tokOnce   sync.Once
	tokBodies *tokenBodies
	spBodies  *sparseBodies
	tokErr    error
)

func fullBodies(b *testing.B) (*tokenBodies, *sparseBodies) {
	tokOnce.Do(func() {
		if tokBodies, tokErr = makeTokenBodies(tokDocs, tokTokens, tokDims); tokErr == nil {
			spBodies, tokErr = makeSparseBodies(spDocs, spNNZ)
		}
	})
	mustOK(b, tokErr)
	return tokBodies, spBodies
}

func BenchmarkTokens_Decode_TEIJSON(b *testing.B) {
	tb, _ := fullBodies(b)
	for b.Loop() {
		_, err := decodeTEITokens(tb.tei)
		mustOK(b, err)
	}
	b.ReportMetric(float64(len(tb.tei)), "body-B")
}

func benchRagged(b *testing.B, name string, body func(*tokenBodies) []byte) {
	tb, _ := fullBodies(b)
	dec := raggedDecoders[name]
	for b.Loop() {
		t, err := dec(tb)
		mustOK(b, err)
		if _, ok := densewire.ViewFloat32(t.Data); !ok {
			// an unaligned body: the one copy a client would make
			rows, err := densewire.NewTensor(t.DType, int(t.Offsets[t.N]), t.D, t.Data)
			mustOK(b, err)
			_, err = rows.Float32()
			mustOK(b, err)
		}
	}
	b.ReportMetric(float64(len(body(tb))), "body-B")
}

func BenchmarkTokens_Decode_Raw(b *testing.B) {
	benchRagged(b, "Raw", func(t *tokenBodies) []byte { return t.raw })
}
func BenchmarkTokens_Decode_Arrow(b *testing.B) {
	benchRagged(b, "Arrow", func(t *tokenBodies) []byte { return t.arrow })
}
func BenchmarkTokens_Decode_Msgpack(b *testing.B) {
	benchRagged(b, "Msgpack", func(t *tokenBodies) []byte { return t.msgpack })
}
func BenchmarkTokens_Decode_Protobuf(b *testing.B) {
	benchRagged(b, "Protobuf", func(t *tokenBodies) []byte { return t.protobuf })
}

func BenchmarkSparse_Decode_TEIJSON(b *testing.B) {
	_, sb := fullBodies(b)
	for b.Loop() {
		_, err := decodeTEISparse(sb.tei)
		mustOK(b, err)
	}
	b.ReportMetric(float64(len(sb.tei)), "body-B")
}

func benchSparse(b *testing.B, name string, body func(*sparseBodies) []byte) {
	_, sb := fullBodies(b)
	dec := sparseDecoders[name]
	for b.Loop() {
		_, err := dec(sb)
		mustOK(b, err)
	}
	b.ReportMetric(float64(len(body(sb))), "body-B")
}

func BenchmarkSparse_Decode_Raw(b *testing.B) {
	benchSparse(b, "Raw", func(s *sparseBodies) []byte { return s.raw })
}
func BenchmarkSparse_Decode_Arrow(b *testing.B) {
	benchSparse(b, "Arrow", func(s *sparseBodies) []byte { return s.arrow })
}
func BenchmarkSparse_Decode_Msgpack(b *testing.B) {
	benchSparse(b, "Msgpack", func(s *sparseBodies) []byte { return s.msgpack })
}
func BenchmarkSparse_Decode_Protobuf(b *testing.B) {
	benchSparse(b, "Protobuf", func(s *sparseBodies) []byte { return s.protobuf })
}
