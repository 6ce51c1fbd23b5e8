package densewire_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	densewire "github.com/densewire/densewire/go"
	_ "github.com/densewire/densewire/go/arrowipc" // the Arrow decoder of sparse tensors
)

func serverURL(t *testing.T) string {
	base := os.Getenv("DENSEWIRE_SERVER_URL")
	if base == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("DENSEWIRE_SERVER_URL is not set, and CI=true: scripts/test.sh must start densewire serve")
		}
		t.Skip("DENSEWIRE_SERVER_URL is not set (scripts/test.sh starts densewire serve --model hash:384 there)")
	}
	return base
}

// Sparse vectors from the real server (DENSEWIRE_SERVER_URL, the hash model scripts/test.sh starts):
// every format gives the vectors of TEI's JSON shape, bit for bit; a text over the model's limit with
// Truncate false is the server's 413, named.
func TestEmbedSparseLive(t *testing.T) {
	base := serverURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	texts := []string{"a cat sits on the mat", "hi", "the quick brown fox jumps over the lazy dog"}
	retry := &densewire.RetryPolicy{MaxRetries: 8, BaseDelay: 100 * time.Millisecond, MaxDelay: 2 * time.Second}
	client := func(f densewire.Format) *densewire.Client {
		return &densewire.Client{BaseURL: base, APIKey: os.Getenv("DENSEWIRE_API_KEY"), Formats: []densewire.Format{f}, Retry: retry}
	}
	sparse := func(f densewire.Format, req *densewire.SparseRequest) *densewire.SparseTensor {
		s, _, err := client(f).EmbedSparse(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		return s
	}
	tei := sparse(densewire.FormatJSON, &densewire.SparseRequest{Inputs: texts})
	if tei.N != 3 || tei.DType != densewire.Float32 {
		t.Fatalf("TEI JSON: %d vectors of %s", tei.N, tei.DType)
	}
	for i := range 3 {
		if idx, _ := tei.Vector(i); len(idx) == 0 {
			t.Fatalf("text %d has no non-zero weight", i)
		}
	}
	if a, _ := tei.Vector(0); reflect.DeepEqual(a, func() []uint32 { b, _ := tei.Vector(2); return b }()) {
		t.Fatal("two different texts have the same indices")
	}
	var vocab uint64
	for _, f := range []densewire.Format{densewire.FormatRaw, densewire.FormatMsgpack, densewire.FormatProtobuf, densewire.FormatArrow} {
		s := sparse(f, &densewire.SparseRequest{Inputs: texts})
		if s.DType != densewire.Float32 || s.V < tei.V || !reflect.DeepEqual(s.Offsets, tei.Offsets) ||
			!reflect.DeepEqual(s.Indices, tei.Indices) || string(s.Data) != string(tei.Data) {
			t.Fatalf("%s: %s over %d, offsets %v differ from TEI's JSON %v over %d (or the indices or values do)", f, s.DType, s.V, s.Offsets, tei.Offsets, tei.V)
		}
		vocab = s.V
	}
	if s := sparse(densewire.FormatJSON, &densewire.SparseRequest{Inputs: texts, VocabSize: vocab}); s.V != vocab {
		t.Fatalf("VocabSize %d gave TEI's JSON a vocabulary of %d", vocab, s.V)
	}

	// the hash:D rule (python/src/densewire/_backends/hash.py): blake2b of each word, index x % 30522,
	// weight ((x >> 40) + 1) / 2^24, the largest per index
	hello := sparse(densewire.FormatRaw, &densewire.SparseRequest{Inputs: []string{"hello world hello"}})
	if idx, data := hello.Vector(0); hello.V != 30522 || !reflect.DeepEqual(idx, []uint32{26240, 26746}) ||
		string(data) != string(densewire.Float32Bytes([]float32{0.827504, 0.3063963})) {
		t.Fatalf("hello world hello: %v over %d", idx, hello.V)
	}
	top := sparse(densewire.FormatMsgpack, &densewire.SparseRequest{Inputs: []string{"hello world hello", texts[2]}, MaxActiveDims: 1})
	if idx, _ := top.Vector(0); !reflect.DeepEqual(top.Offsets, []uint32{0, 1, 2}) || idx[0] != 26240 {
		t.Fatalf("MaxActiveDims 1: offsets %v, indices %v", top.Offsets, top.Indices)
	}

	long := strings.Repeat("word ", 9000)
	no := false
	_, _, err := client(densewire.FormatRaw).EmbedSparse(ctx, &densewire.SparseRequest{Inputs: []string{long}, Truncate: &no})
	var de *densewire.Error
	if !errors.As(err, &de) || de.Status != http.StatusRequestEntityTooLarge || !strings.Contains(de.Message, "tokens") {
		t.Fatalf("a text over the limit: %v", err)
	}
	yes := true
	if s := sparse(densewire.FormatRaw, &densewire.SparseRequest{Inputs: []string{long, "short"}, Truncate: &yes}); s.N != 2 {
		t.Fatalf("truncated: %d vectors", s.N)
	}
}

// TEI's JSON is read with its checks: each fault is named by category and field.
func TestEmbedSparseTEIJSON(t *testing.T) {
	var body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/embed_sparse" || r.Header.Get("Accept") == "" {
			http.Error(w, "wrong route "+r.URL.Path, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	c := &densewire.Client{BaseURL: srv.URL}
	ctx := context.Background()
	body = `[[{"index":1,"value":0.5},{"index":7,"value":2}],[]]`
	s, _, err := c.EmbedSparse(ctx, &densewire.SparseRequest{Inputs: []string{"a", "b"}})
	if err != nil || s.N != 2 || s.V != 8 || !reflect.DeepEqual(s.Offsets, []uint32{0, 2, 2}) || !reflect.DeepEqual(s.Indices, []uint32{1, 7}) {
		t.Fatalf("%+v, %v", s, err)
	}
	if s, _, err = c.EmbedSparse(ctx, &densewire.SparseRequest{Inputs: []string{"a", "b"}, VocabSize: 30522}); err != nil || s.V != 30522 {
		t.Fatalf("VocabSize: %+v, %v", s, err)
	}
	for _, tc := range []struct {
		body, field string
		cat         densewire.Category
	}{
		{`[[{"index":-1,"value":1}]]`, "[0][0].index", densewire.InvalidField},
		{`[[{"index":1.5,"value":1}]]`, "[0][0].index", densewire.InvalidField},
		{`[[{"value":1}]]`, "[0][0].index", densewire.InvalidField},
		{`[[{"index":1,"value":"x"}]]`, "", densewire.Malformed},
		{`[[{"index":3,"value":1},{"index":2,"value":1}]]`, "indices", densewire.InvalidField},
		{`[[`, "", densewire.Malformed},
		{`[[{"index":1,"value":1}],[]]`, "data", densewire.ShapeMismatch}, // two vectors for one input
	} {
		body = tc.body
		_, _, err := c.EmbedSparse(ctx, &densewire.SparseRequest{Inputs: []string{"a"}})
		var de *densewire.Error
		if !errors.As(err, &de) || de.Category != tc.cat || de.Field != tc.field {
			t.Errorf("%s: %v, want %s at %q", tc.body, err, tc.cat, tc.field)
		}
	}
	if _, _, err := c.EmbedSparse(ctx, &densewire.SparseRequest{}); !errors.Is(err, densewire.InvalidField) {
		t.Errorf("no inputs: %v", err)
	}
}

// A 503 is retried as Embed's are (SPEC.md 18); the error of the last attempt says how many were made.
func TestEmbedSparseRetries(t *testing.T) {
	calls, fail := 0, 1
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		if calls <= fail {
			w.Header().Set("Retry-After", "0")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":"model is overloaded","error_type":"Overloaded"}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`[[{"index":3,"value":1.5}]]`))
	}))
	defer srv.Close()
	c := &densewire.Client{BaseURL: srv.URL, Retry: &densewire.RetryPolicy{MaxRetries: 2, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond}}
	s, _, err := c.EmbedSparse(context.Background(), &densewire.SparseRequest{Inputs: []string{"a"}})
	if err != nil || calls != 2 || s.N != 1 {
		t.Fatalf("after one 503: %v, %d calls", err, calls)
	}
	calls, fail = 0, 10
	_, _, err = c.EmbedSparse(context.Background(), &densewire.SparseRequest{Inputs: []string{"a"}})
	var de *densewire.Error
	if !errors.As(err, &de) || de.Status != http.StatusServiceUnavailable || de.Attempts != 3 || calls != 3 {
		t.Fatalf("always 503: %v (%d calls)", err, calls)
	}
}
