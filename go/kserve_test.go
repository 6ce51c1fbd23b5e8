package densewire_test

import (
	"encoding/hex"
	"encoding/json"
	"net/http"
	"reflect"
	"strconv"
	"testing"
	"unsafe"

	densewire "github.com/densewire/densewire/go"
)

// kserveGoldenOutput is an output a kserve.json response case expects (SPEC.md 19.6).
type kserveGoldenOutput struct {
	Name        string         `json:"name"`
	Datatype    string         `json:"datatype"`
	Shape       []int          `json:"shape"`
	Binary      bool           `json:"binary"`
	Parameters  map[string]any `json:"parameters"`
	DType       string         `json:"dtype"`
	Items       []string       `json:"items"`
	ElementsHex []string       `json:"elements_hex"`
}

func kserveHeaders(c *goldenCase) http.Header {
	h := http.Header{}
	for k, v := range c.Headers {
		h.Set(k, v)
	}
	return h
}

// checkKServe runs a kserve.json case (the response reader; the kserve_request cases are a server's).
func checkKServe(t *testing.T, c *goldenCase) {
	if c.Direction != "" {
		_, err := densewire.DecodeKServe(kserveHeaders(c), mustHex(t, *c.InputHex))
		checkCaseError(t, c, err)
		return
	}
	body := mustHex(t, *c.EncodedHex)
	r, err := densewire.DecodeKServe(kserveHeaders(c), body)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct {
		got  string
		want *string
	}{{r.ModelName, c.ModelName}, {r.ModelVersion, c.ModelVersion}, {r.ID, c.ResponseID}} {
		want := ""
		if p.want != nil {
			want = *p.want
		}
		if p.got != want {
			t.Fatalf("model_name/model_version/id %q, want %q", p.got, want)
		}
	}
	if len(r.Outputs) != len(c.Outputs) {
		t.Fatalf("%d outputs, want %d", len(r.Outputs), len(c.Outputs))
	}
	blobAt := len(body)
	if v := c.Headers["Inference-Header-Content-Length"]; v != "" {
		blobAt, _ = strconv.Atoi(v)
	}
	for i, want := range c.Outputs {
		out := r.Outputs[i]
		if out.Name != want.Name || out.Datatype != want.Datatype || !reflect.DeepEqual(out.Shape, want.Shape) || out.Binary != want.Binary {
			t.Fatalf("output %d: %s %s %v binary=%v, want %s %s %v binary=%v", i, out.Name, out.Datatype, out.Shape, out.Binary,
				want.Name, want.Datatype, want.Shape, want.Binary)
		}
		params := map[string]any{}
		for k, v := range out.Parameters {
			if k != "binary_data_size" {
				params[k] = v
			}
		}
		if !reflect.DeepEqual(params, want.Parameters) {
			t.Fatalf("output %d parameters %v, want %v", i, params, want.Parameters)
		}
		start := blobAt
		if out.Binary {
			n, _ := out.Parameters["binary_data_size"].(json.Number).Int64()
			blobAt += int(n)
		}
		if want.Datatype == "BYTES" {
			got := make([]string, len(out.Elements))
			for j, e := range out.Elements {
				got[j] = hex.EncodeToString(e)
			}
			if !reflect.DeepEqual(got, want.ElementsHex) && !(len(got) == 0 && len(want.ElementsHex) == 0) {
				t.Fatalf("elements %v, want %v", got, want.ElementsHex)
			}
			continue
		}
		n, d := 1, want.Shape[0]
		if len(want.Shape) == 2 {
			n, d = want.Shape[0], want.Shape[1]
		}
		tensor := out.Tensor
		if tensor.DType.String() != want.DType || tensor.N != n || tensor.D != d {
			t.Fatalf("tensor %s (%d, %d), want %s (%d, %d)", tensor.DType, tensor.N, tensor.D, want.DType, n, d)
		}
		if got, items := hex.EncodeToString(tensor.Data), hex.EncodeToString(itemsLE(t, want.Items)); got != items {
			t.Fatalf("data %s, want %s", got, items)
		}
		if out.Binary && len(tensor.Data) > 0 && unsafe.SliceData(tensor.Data) != &body[start] {
			t.Fatalf("a blob's tensor is not a view over the body")
		}
	}
}

func TestDecodeKServeEmbeddings(t *testing.T) {
	header := `{"model_name":"m","outputs":[{"name":"embedding","datatype":"UINT8","shape":[1,3],"parameters":{"quantization":"455fc59476466b04","binary_data_size":3}}]}`
	body := append([]byte(header), 0, 128, 255)
	h := http.Header{}
	h.Set(densewire.HeaderInferenceHeaderContentLength, strconv.Itoa(len(header)))
	r, err := densewire.DecodeKServe(h, body)
	if err != nil {
		t.Fatal(err)
	}
	tensor, meta, err := r.Embeddings("embedding")
	if err != nil {
		t.Fatal(err)
	}
	if tensor.DType != densewire.Uint8 || tensor.N != 1 || tensor.D != 3 || meta.Model != "m" || meta.Quantization != "455fc59476466b04" {
		t.Fatalf("%v %+v", tensor, meta)
	}
	if _, _, err := r.Embeddings("pooled"); err == nil {
		t.Fatal("no error for a missing output")
	}
	if _, err := densewire.KServeDType("INT64", "outputs[0].datatype"); err == nil {
		t.Fatal("INT64 has no densewire dtype")
	}
	// JSON data: nested arrays in row-major order; an int8 written as 2.0 is the integer 2 (SPEC.md
	// 3.5), 2.5 is not an int8
	r, err = densewire.DecodeKServe(nil, []byte(`{"outputs":[{"name":"e","datatype":"INT8","shape":[2,2],"data":[[1,-2],[3,-128]]}]}`))
	if err != nil || !reflect.DeepEqual(r.Outputs[0].Tensor.Data, []byte{1, 0xfe, 3, 0x80}) {
		t.Fatalf("%v %v", r, err)
	}
	r, err = densewire.DecodeKServe(nil, []byte(`{"outputs":[{"name":"e","datatype":"INT8","shape":[2],"data":[2.0,-3e0]}]}`))
	if err != nil || !reflect.DeepEqual(r.Outputs[0].Tensor.Data, []byte{2, 0xfd}) {
		t.Fatalf("%v %v", r, err)
	}
	_, err = densewire.DecodeKServe(nil, []byte(`{"outputs":[{"name":"e","datatype":"INT8","shape":[1],"data":[2.5]}]}`))
	if e, ok := err.(*densewire.Error); !ok || e.Category != densewire.InvalidField || e.Field != "outputs[0].data[0]" {
		t.Fatalf("%v", err)
	}
	_, err = densewire.DecodeKServe(nil, []byte(`{"outputs":[]} {}`))
	if e, ok := err.(*densewire.Error); !ok || e.Category != densewire.Malformed {
		t.Fatalf("two JSON values: %v", err)
	}
}

// FuzzDecodeKServe: any body and header length gives a response whose tensors fit their shapes and
// lie inside the body, or a decoder error of the spec's categories with an offset inside the body.
func FuzzDecodeKServe(f *testing.F) {
	for _, c := range loadGolden(f) {
		if c.Format == "kserve" {
			body := c.EncodedHex
			if body == nil {
				body = c.InputHex
			}
			b, _ := hex.DecodeString(*body)
			f.Add(c.Headers["Inference-Header-Content-Length"], b)
		}
	}
	f.Fuzz(func(t *testing.T, length string, body []byte) {
		h := http.Header{}
		if length != "" {
			h.Set(densewire.HeaderInferenceHeaderContentLength, length)
		}
		r, err := densewire.DecodeKServe(h, body)
		if err != nil {
			checkDecodeError(t, err, len(body))
			return
		}
		for _, out := range r.Outputs {
			if out.Tensor != nil && len(out.Tensor.Data) != out.Tensor.N*out.Tensor.RowBytes() {
				t.Fatalf("%s: %d bytes for (%d, %d)", out.Name, len(out.Tensor.Data), out.Tensor.N, out.Tensor.D)
			}
		}
	})
}
