package densewire_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"

	densewire "github.com/densewire/densewire/go"
)

type envelopeJSON struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    string  `json:"code"`
		Offset  *int    `json:"offset"`
	} `json:"error"`
}

func serve(t *testing.T, h http.Handler, method, target string, headers map[string]string) *http.Response {
	t.Helper()
	r := httptest.NewRequest(method, target, nil)
	for k, v := range headers {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Result()
}

func sample(t *testing.T, n, d int) (*densewire.Tensor, *densewire.Meta) {
	v := make([]float32, n*d)
	for i := range v {
		v[i] = float32(i%97) / 7
	}
	tensor, err := densewire.FromFloat32(v, n, d, densewire.Float32)
	if err != nil {
		t.Fatal(err)
	}
	return tensor, &densewire.Meta{Model: "m", PromptTokens: uint64(n), TotalTokens: uint64(n)}
}

func TestTensorHandlerFormats(t *testing.T) {
	tensor, meta := sample(t, 3, 5)
	h := &densewire.TensorHandler{Tensor: func(*http.Request) (*densewire.Tensor, *densewire.Meta, error) { return tensor, meta, nil }}
	for _, tt := range []struct {
		accept, contentType string
	}{
		{"", "application/json"},
		{"application/octet-stream", "application/octet-stream"},
		{"application/x-msgpack", "application/x-msgpack"},
		{"application/protobuf", "application/protobuf"},
		{"application/vnd.apache.arrow.stream", "application/vnd.apache.arrow.stream"},
		{"application/json;q=0.1, */*;q=0.2", "application/octet-stream"},
	} {
		t.Run(tt.accept, func(t *testing.T) {
			resp := serve(t, h, "POST", "/v1/embeddings", map[string]string{"Accept": tt.accept})
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != tt.contentType {
				t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			if resp.Header.Get("Vary") != "Accept, Accept-Encoding" {
				t.Fatalf("Vary %q", resp.Header.Get("Vary"))
			}
			body, _ := io.ReadAll(resp.Body)
			f, _ := densewire.FormatOf(resp.Header.Get("Content-Type"))
			got, gotMeta, err := densewire.Decode(f, resp.Header, body)
			if err != nil {
				t.Fatal(err)
			}
			sameTensor(t, "response", got, tensor)
			sameMeta(t, "response", gotMeta, meta)
		})
	}
}

func TestWriteTensorCompression(t *testing.T) {
	big, meta := sample(t, 10, 100) // 4000 bytes raw
	small, _ := sample(t, 1, 4)
	for _, tt := range []struct {
		name, acceptEncoding string
		tensor               *densewire.Tensor
		coding               string // the Content-Encoding expected, "" for none
	}{
		{"gzip", "gzip", big, "gzip"},
		{"x-gzip", "x-gzip", big, "gzip"},
		{"br", "br", big, "br"},
		{"zstd", "zstd", big, "zstd"},
		{"zstd first at equal q", "gzip, br, zstd", big, "zstd"},
		{"br before gzip at equal q", "gzip, br", big, "br"},
		{"q-values win", "gzip;q=1, zstd;q=0.5", big, "gzip"},
		{"below threshold", "gzip", small, ""},
		{"q=0", "gzip;q=0, deflate", big, ""},
		{"star", "deflate;q=1, *;q=0.5", big, "zstd"},
		{"star less the excluded", "*;q=0.1, zstd;q=0", big, "br"},
		{"a bad q-value is 0", "zstd;q=high, gzip;q=0.2", big, "gzip"},
		{"header case and spaces", " GZIP ; Q=0.9 ", big, "gzip"},
		{"none", "", big, ""},
		{"identity only", "identity", big, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/", nil)
			r.Header.Set("Accept", "application/octet-stream")
			r.Header.Set("Accept-Encoding", tt.acceptEncoding)
			w := httptest.NewRecorder()
			if err := densewire.WriteTensor(w, r, tt.tensor, meta, nil); err != nil {
				t.Fatal(err)
			}
			if got := w.Header().Get("Content-Encoding"); got != tt.coding {
				t.Fatalf("Content-Encoding %q, want %q", got, tt.coding)
			}
			if w.Header().Get("Content-Length") != strconv.Itoa(w.Body.Len()) {
				t.Fatalf("Content-Length %s for %d bytes", w.Header().Get("Content-Length"), w.Body.Len())
			}
			body := w.Body.Bytes()
			var zr io.Reader
			switch tt.coding {
			case "gzip":
				gr, err := gzip.NewReader(bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				zr = gr
			case "br":
				zr = brotli.NewReader(bytes.NewReader(body))
			case "zstd":
				dr, err := zstd.NewReader(bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				defer dr.Close()
				zr = dr
			}
			if zr != nil {
				var err error
				if body, err = io.ReadAll(zr); err != nil {
					t.Fatal(err)
				}
			}
			got, _, err := densewire.DecodeRaw(w.Header(), body)
			if err != nil {
				t.Fatal(err)
			}
			sameTensor(t, "body", got, tt.tensor)
		})
	}
}

func TestWriteTensorErrors(t *testing.T) {
	nan, _ := densewire.FromFloat32([]float32{1, float32(math.NaN())}, 1, 2, densewire.Float32)
	h := &densewire.TensorHandler{Tensor: func(r *http.Request) (*densewire.Tensor, *densewire.Meta, error) {
		switch r.URL.Path {
		case "/nan":
			return nan, nil, nil
		case "/missing":
			return nil, nil, &densewire.Error{Category: densewire.NotFound, Field: "model", Offset: -1, Message: "no model x"}
		case "/internal":
			return nil, nil, errors.New("database password is hunter2")
		}
		panic("unexpected path")
	}, WriteOptions: densewire.WriteOptions{Formats: []densewire.Format{densewire.FormatJSON, densewire.FormatRaw}}}

	check := func(resp *http.Response, status int, code, param string) envelopeJSON {
		t.Helper()
		if resp.StatusCode != status || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("status %d %s, want %d", resp.StatusCode, resp.Header.Get("Content-Type"), status)
		}
		var env envelopeJSON
		if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
			t.Fatal(err)
		}
		if env.Error.Code != code || (param == "") != (env.Error.Param == nil) || env.Error.Param != nil && *env.Error.Param != param {
			t.Fatalf("envelope %+v", env.Error)
		}
		return env
	}
	env := check(serve(t, h, "POST", "/nan", nil), 422, "non_finite", "data[0].embedding[1]")
	if env.Error.Type != "invalid_request_error" || !strings.HasPrefix(env.Error.Message, "data[0].embedding[1]: ") {
		t.Fatalf("%+v", env.Error)
	}
	resp := serve(t, h, "POST", "/nan", map[string]string{"Accept": "text/csv"})
	env = check(resp, 406, "not_acceptable", "Accept")
	if !strings.Contains(env.Error.Message, "application/octet-stream") || resp.Header.Get("Vary") == "" {
		t.Fatalf("406: %+v %v", env.Error, resp.Header)
	}
	check(serve(t, h, "POST", "/missing", nil), 404, "not_found", "model")
	env = check(serve(t, h, "POST", "/internal", nil), 500, "", "")
	if strings.Contains(env.Error.Message, "hunter2") || env.Error.Type != "server_error" {
		t.Fatalf("internal error leaked: %+v", env.Error)
	}
	// the raw format of the same NaN tensor is fine: bits travel unchanged
	resp = serve(t, h, "POST", "/nan?format=raw", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("raw NaN: %d", resp.StatusCode)
	}
	resp = serve(t, h, "HEAD", "/nan?format=raw", nil)
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 || len(b) != 0 || resp.Header.Get("Content-Length") != "8" {
		t.Fatalf("HEAD: %d %d %s", resp.StatusCode, len(b), resp.Header.Get("Content-Length"))
	}
}

// The error envelope's offset is the error's offset (SPEC.md section 11 example).
func TestWriteErrorEnvelope(t *testing.T) {
	_, _, err := densewire.DecodeJSON([]byte(`{"data":[{"index":0,"embedding":"AACAPwAAAEA="},{"index":1,"embedding":"AACA*wAAAEA="}]}`))
	w := httptest.NewRecorder()
	densewire.WriteError(w, err)
	want := `{"error":{"message":"data[1].embedding: invalid Base64 character '*' at offset 4","type":"invalid_request_error","param":"data[1].embedding","code":"invalid_base64","offset":4}}`
	if w.Code != 400 || w.Body.String() != want {
		t.Fatalf("%d %s", w.Code, w.Body.String())
	}
}
