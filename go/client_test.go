package densewire_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash/fnv"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	densewire "github.com/densewire/densewire/go"
)

// embedText is the fake model: d values derived from the text.
func embedText(text string, d int) []float32 {
	h := fnv.New32a()
	h.Write([]byte(text))
	seed := h.Sum32()
	out := make([]float32, d)
	for j := range out {
		seed = seed*1664525 + 1013904223
		out[j] = float32(int32(seed>>8)%2000) / 1000
	}
	return out
}

// fakeServer answers POST /v1/embeddings as SPEC.md sections 6 and 12 say, with the handler helpers.
type fakeServer struct {
	apiKey    string
	hold      func(r *http.Request, input []string) // called before answering, to block or observe
	mu        sync.Mutex
	requests  []int // input count of each request
	accepts   []string
	inflight  int
	maxFlight int
}

func (s *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != "POST" || r.URL.Path != "/v1/embeddings" {
		densewire.WriteError(w, &densewire.Error{Category: densewire.NotFound, Offset: -1, Message: "no route " + r.URL.Path})
		return
	}
	if s.apiKey != "" && r.Header.Get("Authorization") != "Bearer "+s.apiKey {
		densewire.WriteError(w, &densewire.Error{Category: densewire.Unauthorized, Offset: -1, Message: "wrong API key"})
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		densewire.WriteError(w, &densewire.Error{Category: densewire.UnsupportedMediaType, Field: "Content-Type", Offset: -1, Message: ct})
		return
	}
	var req struct {
		Input          []string `json:"input"`
		Model          string   `json:"model"`
		EncodingFormat string   `json:"encoding_format"`
		Dimensions     int      `json:"dimensions"`
		DType          string   `json:"dtype"`
		Truncate       *bool    `json:"truncate"`
		User           string   `json:"user"`
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields() // unknown fields are invalid_field errors (SPEC.md section 6.1)
	if err := dec.Decode(&req); err != nil {
		densewire.WriteError(w, &densewire.Error{Category: densewire.InvalidField, Offset: -1, Message: err.Error()})
		return
	}
	s.mu.Lock()
	s.inflight++
	s.maxFlight = max(s.maxFlight, s.inflight)
	s.requests = append(s.requests, len(req.Input))
	s.accepts = append(s.accepts, r.Header.Get("Accept"))
	s.mu.Unlock()
	defer func() { s.mu.Lock(); s.inflight--; s.mu.Unlock() }()
	if s.hold != nil {
		s.hold(r, req.Input)
	}
	for i, text := range req.Input {
		if text == "" {
			densewire.WriteError(w, &densewire.Error{Category: densewire.InvalidField, Field: "input[" + strconv.Itoa(i) + "]", Offset: -1, Message: "empty input"})
			return
		}
	}
	d := 8
	if req.Dimensions > 0 {
		d = req.Dimensions
	}
	dtype := densewire.Float32
	if req.DType != "" {
		var err error
		if dtype, err = densewire.ParseDType(req.DType); err != nil {
			densewire.WriteError(w, err)
			return
		}
	}
	var flat []float32
	for _, text := range req.Input {
		flat = append(flat, embedText(text, d)...)
	}
	tensor, err := densewire.FromFloat32(flat, len(req.Input), d, dtype)
	if err != nil {
		densewire.WriteError(w, err)
		return
	}
	model := req.Model
	if model == "" {
		model = "fake-8"
	}
	densewire.WriteTensor(w, r, tensor, &densewire.Meta{Model: model, PromptTokens: uint64(len(req.Input)), TotalTokens: uint64(len(req.Input))},
		&densewire.WriteOptions{JSON: densewire.JSONOptions{EncodingFormat: densewire.EncodingFormat(req.EncodingFormat)}})
}

func inputs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "text number " + string(rune('A'+i%26)) + string(rune('a'+i/26))
	}
	return out
}

func checkRows(t *testing.T, tensor *densewire.Tensor, input []string, d int) {
	t.Helper()
	if tensor.N != len(input) || tensor.D != d {
		t.Fatalf("shape (%d, %d), want (%d, %d)", tensor.N, tensor.D, len(input), d)
	}
	got, err := tensor.Float32()
	if err != nil {
		t.Fatal(err)
	}
	for i, text := range input {
		want := embedText(text, d)
		for j := range want {
			if got[i*d+j] != want[j] {
				t.Fatalf("row %d (%q) item %d: %g, want %g", i, text, j, got[i*d+j], want[j])
			}
		}
	}
}

func TestClientFormats(t *testing.T) {
	fake := &fakeServer{apiKey: "sk-test"}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	input := inputs(5)
	for _, formats := range [][]densewire.Format{nil, {densewire.FormatJSON}, {densewire.FormatMsgpack}, {densewire.FormatProtobuf},
		{densewire.FormatArrow}, {densewire.FormatRaw}} {
		c := &densewire.Client{BaseURL: srv.URL + "/", APIKey: "sk-test", Formats: formats}
		tensor, meta, err := c.Embed(context.Background(), &densewire.EmbeddingsRequest{Input: input, Model: "m1"})
		if err != nil {
			t.Fatalf("%v: %v", formats, err)
		}
		checkRows(t, tensor, input, 8)
		if meta.Model != "m1" || meta.PromptTokens != 5 {
			t.Fatalf("%v: meta %+v", formats, meta)
		}
	}
	if got := fake.accepts[0]; got != "application/octet-stream, application/vnd.msgpack;q=0.9, application/protobuf;q=0.8, application/json;q=0.7" {
		t.Fatalf("default Accept %q", got)
	}
}

func TestClientBatchesConcurrently(t *testing.T) {
	const limit = 3
	fake := &fakeServer{}
	fake.hold = func(r *http.Request, _ []string) {
		deadline := time.Now().Add(300 * time.Millisecond)
		for time.Now().Before(deadline) { // wait for the batches that may run alongside
			fake.mu.Lock()
			full := fake.inflight >= limit
			fake.mu.Unlock()
			if full {
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	input := inputs(20)
	c := &densewire.Client{BaseURL: srv.URL, BatchSize: 3, Concurrency: limit}
	tensor, meta, err := c.Embed(context.Background(), &densewire.EmbeddingsRequest{Input: input, Dimensions: 16, DType: densewire.Float16})
	if err != nil {
		t.Fatal(err)
	}
	if len(fake.requests) != 7 || fake.maxFlight != limit {
		t.Fatalf("%d requests, %d at most in flight; want 7 and %d", len(fake.requests), fake.maxFlight, limit)
	}
	if tensor.DType != densewire.Float16 || meta.PromptTokens != 20 || meta.Model != "fake-8" {
		t.Fatalf("%s %+v", tensor.DType, meta)
	}
	// rows arrive in input order whatever order the batches finish in
	want := make([]float32, 0, 20*16)
	for _, text := range input {
		want = append(want, embedText(text, 16)...)
	}
	wantTensor, _ := densewire.FromFloat32(want, 20, 16, densewire.Float16)
	sameTensor(t, "batched", tensor, wantTensor)
}

func TestClientServerError(t *testing.T) {
	var cancelled, timedOut atomic.Int32
	fake := &fakeServer{}
	fake.hold = func(r *http.Request, input []string) {
		for _, text := range input {
			if text == "" { // the failing batch answers once the others are in flight
				for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
					fake.mu.Lock()
					all := fake.inflight >= 4
					fake.mu.Unlock()
					if all {
						break
					}
				}
				return
			}
		}
		select { // the other batches wait until the failure cancels them
		case <-r.Context().Done():
			cancelled.Add(1)
		case <-time.After(5 * time.Second):
			timedOut.Add(1)
		}
	}
	srv := httptest.NewServer(fake)
	input := inputs(8)
	input[5] = ""
	c := &densewire.Client{BaseURL: srv.URL, BatchSize: 2, Concurrency: 4}
	start := time.Now()
	_, _, err := c.Embed(context.Background(), &densewire.EmbeddingsRequest{Input: input})
	var e *densewire.Error
	if !errors.As(err, &e) || e.Status != 422 || e.Category != densewire.InvalidField || e.Field != "input[5]" || e.Message != "input[5]: empty input" {
		t.Fatalf("got %#v", err)
	}
	if !errors.Is(err, densewire.InvalidField) || time.Since(start) > 3*time.Second {
		t.Fatalf("errors.Is or slow: %v", time.Since(start))
	}
	srv.Close() // waits for the handlers
	if timedOut.Load() != 0 || cancelled.Load() == 0 {
		t.Fatalf("%d batches cancelled, %d not cancelled after another failed", cancelled.Load(), timedOut.Load())
	}
}

func TestClientCancellation(t *testing.T) {
	fake := &fakeServer{hold: func(r *http.Request, _ []string) { <-r.Context().Done() }}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	c := &densewire.Client{BaseURL: srv.URL}
	_, _, err := c.Embed(ctx, &densewire.EmbeddingsRequest{Input: inputs(3)})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v", err)
	}
}

func TestClientErrorsWithoutEnvelope(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		check   func(t *testing.T, err error)
	}{
		{"plain 502", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(502)
			w.Write([]byte("upstream down"))
		}, func(t *testing.T, err error) {
			var e *densewire.Error
			if !errors.As(err, &e) || e.Status != 502 || e.Category != densewire.Unavailable || e.Message != "upstream down" {
				t.Fatalf("%#v", err)
			}
		}},
		{"openai error with null code", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(401)
			w.Write([]byte(`{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","param":null,"code":null}}`))
		}, func(t *testing.T, err error) {
			var e *densewire.Error
			if !errors.As(err, &e) || e.Category != densewire.Unauthorized || e.Message != "Incorrect API key provided" || e.Field != "" || e.Offset != -1 {
				t.Fatalf("%#v", err)
			}
		}},
		{"unknown content type", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/csv")
			w.Write([]byte("1,2"))
		}, func(t *testing.T, err error) {
			if !errors.Is(err, densewire.UnsupportedMediaType) {
				t.Fatalf("%v", err)
			}
		}},
		{"wrong row count", func(w http.ResponseWriter, r *http.Request) {
			tensor, _ := densewire.FromFloat32([]float32{1}, 1, 1, densewire.Float32)
			densewire.WriteTensor(w, r, tensor, &densewire.Meta{}, nil)
		}, func(t *testing.T, err error) {
			if !errors.Is(err, densewire.ShapeMismatch) {
				t.Fatalf("%v", err)
			}
		}},
		{"corrupt body", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/vnd.msgpack")
			w.Write([]byte{0x83, 0xa5})
		}, func(t *testing.T, err error) {
			if !errors.Is(err, densewire.Truncated) {
				t.Fatalf("%v", err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
			defer srv.Close()
			c := &densewire.Client{BaseURL: srv.URL}
			_, _, err := c.Embed(context.Background(), &densewire.EmbeddingsRequest{Input: []string{"a", "b"}})
			tt.check(t, err)
		})
	}
	c := &densewire.Client{BaseURL: "http://127.0.0.1:1"}
	if _, _, err := c.Embed(context.Background(), &densewire.EmbeddingsRequest{}); !errors.Is(err, densewire.InvalidField) {
		t.Fatalf("empty input: %v", err)
	}
}

// A server that sends the golden bodies as they are, with their headers: the client decodes
// every format to the golden items, and OpenAI's own JSON (pretty, rows out of order) too.
func TestClientAgainstGoldenBodies(t *testing.T) {
	bodies := map[densewire.Format]*goldenCase{}
	var openai *goldenCase
	for _, c := range loadGolden(t) {
		switch {
		case c.file == "tensors" && strings.HasSuffix(c.ID, ".f32.with_model_and_usage") && c.Format != "json",
			c.ID == "json.base64.f32le.with_model_and_usage":
			f, _ := densewire.ParseFormat(c.Format)
			bodies[f] = &c
		case c.ID == "interop.openai.response_float":
			openai = &c
		}
	}
	if len(bodies) != 5 || openai == nil {
		t.Fatalf("golden bodies not found: %d", len(bodies))
	}
	var serve *goldenCase
	var contentType string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range serve.Headers {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", contentType)
		if serve.EncodedHex != nil {
			b, _ := hex.DecodeString(*serve.EncodedHex)
			w.Write(b)
		} else {
			w.Write([]byte(*serve.EncodedText))
		}
	}))
	defer srv.Close()
	for f, c := range bodies {
		serve, contentType = c, f.MediaType()
		if f == densewire.FormatMsgpack {
			contentType = "application/x-msgpack" // an alias
		}
		client := &densewire.Client{BaseURL: srv.URL, Formats: []densewire.Format{f}}
		got, meta, err := client.Embed(context.Background(), &densewire.EmbeddingsRequest{Input: []string{"a", "b"}})
		if err != nil {
			t.Fatalf("%s: %v", c.ID, err)
		}
		sameTensor(t, c.ID, got, expected(t, c))
		sameMeta(t, c.ID, meta, expectedMeta(c))
	}
	serve, contentType = openai, "application/json; charset=utf-8"
	got, meta, err := (&densewire.Client{BaseURL: srv.URL}).Embed(context.Background(), &densewire.EmbeddingsRequest{Input: []string{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	sameTensor(t, openai.ID, got, expected(t, openai))
	if meta.Model != "text-embedding-3-small" || meta.TotalTokens != 6 {
		t.Fatalf("%+v", meta)
	}
}
