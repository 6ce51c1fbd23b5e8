package densewire_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	densewire "github.com/densewire/densewire/go"
	_ "github.com/densewire/densewire/go/arrowipc" // the Arrow decoder of ragged tensors
)

// Per-token embeddings from the real server with the built-in MiniLM model (DENSEWIRE_OVERLOAD_URL,
// which scripts/test.sh starts; the hash model of DENSEWIRE_SERVER_URL has no token states): every
// format gives the matrices of TEI's JSON shape, bit for bit, over one buffer.
func TestEmbedTokensLive(t *testing.T) {
	base := overloadURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	texts := []string{"a cat sits on the mat", "hi", "the quick brown fox jumps over the lazy dog"}
	retry := &densewire.RetryPolicy{MaxRetries: 8, BaseDelay: 100 * time.Millisecond, MaxDelay: 2 * time.Second}
	tokens := func(f densewire.Format) *densewire.RaggedTensor {
		c := &densewire.Client{BaseURL: base, Formats: []densewire.Format{f}, Retry: retry}
		r, _, err := c.EmbedTokens(ctx, &densewire.TokensRequest{Inputs: texts})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		return r
	}
	tei := tokens(densewire.FormatJSON)
	if tei.N != 3 || tei.D != 384 {
		t.Fatalf("TEI JSON: %d matrices of d %d", tei.N, tei.D)
	}
	if m0, m1, m2 := tei.Matrix(0).N, tei.Matrix(1).N, tei.Matrix(2).N; !(m1 < m0 && m0 < m2 && m1 >= 3) {
		t.Fatalf("token counts %d %d %d", m0, m1, m2)
	}
	for _, f := range []densewire.Format{densewire.FormatRaw, densewire.FormatMsgpack, densewire.FormatProtobuf, densewire.FormatArrow} {
		r := tokens(f)
		if r.DType != densewire.Float32 || !reflect.DeepEqual(r.Offsets, tei.Offsets) || string(r.Data) != string(tei.Data) {
			t.Fatalf("%s: %s offsets %v differ from TEI's JSON %v (or the rows do)", f, r.DType, r.Offsets, tei.Offsets)
		}
	}
}
