package densewire_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	densewire "github.com/densewire/densewire/go"
	"github.com/densewire/densewire/go/arrowipc"
)

// The golden vectors of SPEC.md section 13: ONE data-driven test over testdata/golden/{tensors,
// conversions,invalid,interop,tables,pgcopy,quantization,retry,kserve,ragged,sparse}.json, one subtest per case id (tables:
// table_golden_test.go; pgcopy: pgcopy_test.go; quantization: quantize_golden_test.go; retry: retry_golden_test.go). Every case Go claims (capabilities.json,
// capabilities_test.go) runs: a format or direction this library did not handle would fail here;
// the cases of unclaimed features are logged, not run.

type goldenUsage struct {
	PromptTokens uint64 `json:"prompt_tokens"`
	TotalTokens  uint64 `json:"total_tokens"`
}

type goldenCase struct {
	ID             string            `json:"id"`
	Format         string            `json:"format"`
	Direction      string            `json:"direction"`
	DType          string            `json:"dtype"`
	ByteOrder      string            `json:"byteorder"`
	Shape          []int             `json:"shape"`
	Items          []string          `json:"items"`
	ByteExact      bool              `json:"byte_exact"`
	EncodedText    *string           `json:"encoded_text"`
	EncodedHex     *string           `json:"encoded_hex"`
	Headers        map[string]string `json:"headers"`
	Message        string            `json:"message"`
	EncodingFormat string            `json:"encoding_format"`
	Model          *string           `json:"model"`
	Usage          *goldenUsage      `json:"usage"`
	// conversions
	From   string   `json:"from"`
	To     string   `json:"to"`
	Input  []string `json:"input"`
	Output []string `json:"output"`
	// invalid
	InputText *string `json:"input_text"`
	InputHex  *string `json:"input_hex"`
	Error     string  `json:"error"`
	Offset    *int    `json:"offset"`
	Field     *string `json:"field"`
	// tables (SPEC.md section 15)
	Table          string         `json:"table"`
	Rows           *int           `json:"rows"`
	Columns        []goldenColumn `json:"columns"`
	ColumnEncoding string         `json:"column_encoding"`
	// PostgreSQL binary COPY (SPEC.md section 16; pgcopy_test.go)
	PgType     string    `json:"pg_type"`
	IDs        []*string `json:"ids"`
	ValueDType string    `json:"value_dtype"`
	Values     []string  `json:"values"`
	// quantized embeddings (SPEC.md section 17; quantize_golden_test.go)
	Operation    string   `json:"operation"`
	Lower        []string `json:"lower"`
	Upper        []string `json:"upper"`
	Uint8        []string `json:"uint8"`
	Int8         []string `json:"int8"`
	Codes        []string `json:"codes"`
	Binary       []string `json:"binary"`
	CohereBinary []string `json:"cohere_binary"`
	Dimensions   int      `json:"dimensions"`
	Quantization string   `json:"quantization"`
	// the retry schedule (SPEC.md section 18; retry_golden_test.go)
	Status            int     `json:"status"`
	Retry             int     `json:"retry"`
	RetryAfter        *string `json:"retry_after"`
	Now               float64 `json:"now"`
	Draw              string  `json:"draw"`
	DrawBits          string  `json:"draw_bits"`
	MaxRetries        int     `json:"max_retries"`
	BaseBits          string  `json:"base_bits"`
	CapBits           string  `json:"cap_bits"`
	Wait              string  `json:"wait"`
	WaitBits          string  `json:"wait_bits"`
	GiveUp            string  `json:"give_up"`
	RetryAfterSeconds string  `json:"retry_after_seconds"`
	// ragged and sparse tensors (SPEC.md 20.8; ragged_test.go)
	Kind    string   `json:"kind"`
	Offsets []uint32 `json:"offsets"`
	Indices []uint32 `json:"indices"`
	// KServe v2 responses (SPEC.md 19, Open Inference Protocol; kserve_test.go)
	Outputs      []kserveGoldenOutput `json:"outputs"`
	ModelName    *string              `json:"model_name"`
	ModelVersion *string              `json:"model_version"`
	ResponseID   *string              `json:"response_id"`

	file string
}

// goldenDir finds testdata/golden by walking up from the test's directory to the repo root.
func goldenDir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		p := filepath.Join(dir, "testdata", "golden")
		if st, err := os.Stat(filepath.Join(p, "tensors.json")); err == nil && !st.IsDir() {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("testdata/golden not found above the test directory")
		}
		dir = parent
	}
}

// implementedSpecVersion is the version of SPEC.md this library implements; generate.py --check keeps
// it equal to SPEC.md's.
const implementedSpecVersion = "1.4"

var goldenFiles = []string{"tensors", "conversions", "invalid", "interop", "tables", "pgcopy", "quantization", "retry", "kserve", "ragged", "sparse"}

func loadGolden(tb testing.TB) []goldenCase {
	tb.Helper()
	dir := goldenDir(tb)
	var all []goldenCase
	for _, name := range goldenFiles {
		raw, err := os.ReadFile(filepath.Join(dir, name+".json"))
		if err != nil {
			tb.Fatal(err)
		}
		var f struct {
			SpecVersion string       `json:"spec_version"`
			Cases       []goldenCase `json:"cases"`
		}
		if err := json.Unmarshal(raw, &f); err != nil {
			tb.Fatalf("%s.json: %v", name, err)
		}
		if f.SpecVersion != implementedSpecVersion {
			tb.Fatalf("%s.json: spec_version %q, this library implements %s", name, f.SpecVersion, implementedSpecVersion)
		}
		if len(f.Cases) == 0 {
			tb.Fatalf("%s.json has no cases", name)
		}
		for i := range f.Cases {
			f.Cases[i].file = name
		}
		all = append(all, f.Cases...)
	}
	return all
}

func TestGolden(t *testing.T) {
	cases := loadGolden(t)
	claimed := claimedGolden(t, cases)
	seen := map[string]bool{}
	for _, c := range cases {
		if seen[c.ID] {
			t.Errorf("duplicate case id %s", c.ID)
		}
		seen[c.ID] = true
		if !claimed[c.ID] {
			continue // listed by claimedGolden
		}
		t.Run(c.ID, func(t *testing.T) {
			switch c.file {
			case "tensors", "interop":
				checkValid(t, &c)
			case "conversions":
				checkConversion(t, &c)
			case "invalid":
				checkInvalid(t, &c)
			case "quantization":
				if c.Direction != "" {
					checkInvalidQuantization(t, &c)
				} else {
					checkQuantization(t, &c)
				}
			case "pgcopy":
				if c.Direction != "" {
					checkInvalidPgcopy(t, &c)
				} else {
					checkPgcopy(t, &c)
				}
			case "tables":
				if c.Direction != "" {
					checkInvalidTable(t, &c)
				} else {
					checkTable(t, &c)
				}
			case "retry":
				checkRetry(t, &c)
			case "kserve":
				checkKServe(t, &c)
			case "ragged", "sparse":
				checkKind(t, &c)
			default:
				t.Fatalf("no check for file %s", c.file)
			}
		})
	}
	t.Logf("%d golden cases, %d run", len(cases), len(claimed))
}

func mustDType(t testing.TB, name string) densewire.DType {
	t.Helper()
	d, err := densewire.ParseDType(name)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func mustOrder(t testing.TB, name string) densewire.ByteOrder {
	t.Helper()
	if name == "" {
		return densewire.LittleEndian
	}
	o, err := densewire.ParseByteOrder(name)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// itemsLE lays out the natural (big-endian) hex items as little-endian tensor bytes.
func itemsLE(t testing.TB, items []string) []byte {
	t.Helper()
	var out []byte
	for _, h := range items {
		b := mustHex(t, h)
		for i := len(b) - 1; i >= 0; i-- {
			out = append(out, b[i])
		}
	}
	return out
}

// expected is the tensor a valid case describes.
func expected(t testing.TB, c *goldenCase) *densewire.Tensor {
	t.Helper()
	if len(c.Shape) != 2 {
		t.Fatalf("case has shape %v", c.Shape)
	}
	tensor, err := densewire.NewTensor(mustDType(t, c.DType), c.Shape[0], c.Shape[1], itemsLE(t, c.Items))
	if err != nil {
		t.Fatalf("golden items do not fit the shape: %v", err)
	}
	return tensor
}

// expectedMeta is the meta of an envelope case, nil for a bare tensor.
func expectedMeta(c *goldenCase) *densewire.Meta {
	if c.Model == nil && c.Usage == nil && c.Quantization == "" {
		return nil
	}
	m := &densewire.Meta{Quantization: c.Quantization}
	if c.Model != nil {
		m.Model = *c.Model
	}
	if c.Usage != nil {
		m.PromptTokens, m.TotalTokens = c.Usage.PromptTokens, c.Usage.TotalTokens
	}
	return m
}

// sameTensor compares dtype, shape and bits.
func sameTensor(t testing.TB, what string, got, want *densewire.Tensor) {
	t.Helper()
	if got == nil {
		t.Fatalf("%s: nil tensor", what)
	}
	if got.DType != want.DType || got.N != want.N || got.D != want.D {
		t.Fatalf("%s: got (%d, %d) %s, want (%d, %d) %s", what, got.N, got.D, got.DType, want.N, want.D, want.DType)
	}
	if !bytes.Equal(got.Data, want.Data) {
		t.Fatalf("%s: data\n got %x\nwant %x", what, got.Data, want.Data)
	}
}

func sameMeta(t testing.TB, what string, got, want *densewire.Meta) {
	t.Helper()
	if (got == nil) != (want == nil) || got != nil && *got != *want {
		t.Fatalf("%s: meta %+v, want %+v", what, got, want)
	}
}

func checkValid(t *testing.T, c *goldenCase) {
	want := expected(t, c)
	meta := expectedMeta(c)
	order := mustOrder(t, c.ByteOrder)
	switch c.Format {
	case "base64":
		got, err := densewire.DecodeBase64(*c.EncodedText, want.DType, want.N, want.D, order)
		if err != nil {
			t.Fatal(err)
		}
		sameTensor(t, "decode", got, want)
		if c.ByteExact {
			if enc := densewire.EncodeBase64(want, order); enc != *c.EncodedText {
				t.Fatalf("encode: %q, want %q", enc, *c.EncodedText)
			}
		}
	case "raw":
		h := http.Header{}
		for k, v := range c.Headers {
			h.Set(k, v)
		}
		body := mustHex(t, *c.EncodedHex)
		got, gotMeta, err := densewire.DecodeRaw(h, body)
		if err != nil {
			t.Fatal(err)
		}
		sameTensor(t, "decode", got, want)
		sameMeta(t, "decode", gotMeta, meta)
		if c.ByteExact {
			out := http.Header{}
			densewire.SetRawHeaders(out, want, meta)
			if len(out) != len(c.Headers) {
				t.Fatalf("encode: headers %v, want %v", out, c.Headers)
			}
			for k, v := range c.Headers {
				if out.Get(k) != v {
					t.Fatalf("encode: header %s = %q, want %q", k, out.Get(k), v)
				}
			}
			if !bytes.Equal(want.Data, body) {
				t.Fatalf("encode: body %x, want %x", want.Data, body)
			}
		}
	case "msgpack":
		body := mustHex(t, *c.EncodedHex)
		got, gotMeta, err := densewire.DecodeMsgpack(body)
		if err != nil {
			t.Fatal(err)
		}
		sameTensor(t, "decode", got, want)
		sameMeta(t, "decode", gotMeta, meta)
		if c.ByteExact {
			if enc := densewire.EncodeMsgpack(want, meta); !bytes.Equal(enc, body) {
				t.Fatalf("encode:\n got %x\nwant %x", enc, body)
			}
		}
	case "protobuf":
		body := mustHex(t, *c.EncodedHex)
		var (
			got     *densewire.Tensor
			gotMeta *densewire.Meta
			err     error
		)
		switch c.Message {
		case "Tensor":
			got, err = densewire.DecodeProtobufTensor(body)
		case "EmbeddingsResponse":
			got, gotMeta, err = densewire.DecodeProtobuf(body)
		default:
			t.Fatalf("unknown message %q", c.Message)
		}
		if err != nil {
			t.Fatal(err)
		}
		sameTensor(t, "decode", got, want)
		sameMeta(t, "decode", gotMeta, meta)
		if c.ByteExact {
			if enc := densewire.EncodeProtobuf(want, meta); !bytes.Equal(enc, body) {
				t.Fatalf("encode:\n got %x\nwant %x", enc, body)
			}
		}
	case "arrow":
		body := mustHex(t, *c.EncodedHex)
		got, gotMeta, err := arrowipc.Decode(body)
		if err != nil {
			t.Fatal(err)
		}
		sameTensor(t, "decode", got, want)
		sameMeta(t, "decode", gotMeta, meta)
		enc, err := arrowipc.Encode(want, meta)
		if err != nil {
			t.Fatal(err)
		}
		back, backMeta, err := arrowipc.Decode(enc)
		if err != nil {
			t.Fatalf("decoding our own encoding: %v", err)
		}
		sameTensor(t, "round trip", back, want)
		sameMeta(t, "round trip", backMeta, meta)
	case "json":
		got, gotMeta, err := densewire.DecodeJSON([]byte(*c.EncodedText))
		if err != nil {
			t.Fatal(err)
		}
		sameTensor(t, "decode", got, want)
		if meta != nil {
			sameMeta(t, "decode", gotMeta, meta)
		}
		opts := densewire.JSONOptions{EncodingFormat: densewire.EncodingFormat(c.EncodingFormat), ByteOrder: order}
		if c.EncodingFormat == "" { // interop cases: OpenAI's base64 or float
			opts.EncodingFormat = densewire.EncodingBase64
		}
		enc, err := densewire.EncodeJSON(want, gotMeta, opts)
		if err != nil {
			t.Fatal(err)
		}
		back, backMeta, err := densewire.DecodeJSON(enc)
		if err != nil {
			t.Fatalf("decoding our own encoding %s: %v", enc, err)
		}
		sameTensor(t, "round trip", back, want)
		sameMeta(t, "round trip", backMeta, gotMeta)
	default:
		t.Fatalf("unsupported format %q", c.Format)
	}
}

func checkConversion(t *testing.T, c *goldenCase) {
	from, to := mustDType(t, c.From), mustDType(t, c.To)
	var got []byte
	switch {
	case from == densewire.Float32:
		vals := make([]float32, len(c.Input))
		for i, h := range c.Input {
			v, _ := strconv.ParseUint(h, 16, 32)
			vals[i] = math.Float32frombits(uint32(v))
		}
		n, d := 1, len(vals)
		if len(c.Shape) == 2 {
			n, d = c.Shape[0], c.Shape[1]
		}
		tensor, err := densewire.FromFloat32(vals, n, d, to)
		if err != nil {
			t.Fatal(err)
		}
		got = tensor.Data
		// the scalar functions agree with the bulk path
		for i, v := range vals {
			switch to {
			case densewire.Float16:
				if b := densewire.Float16Bits(v); b != uint16(le(got[2*i:2*i+2])) {
					t.Fatalf("Float16Bits(%x) = %04x, bulk gave %x", math.Float32bits(v), b, got[2*i:2*i+2])
				}
			case densewire.BFloat16:
				if b := densewire.BFloat16Bits(v); b != uint16(le(got[2*i:2*i+2])) {
					t.Fatalf("BFloat16Bits(%x) = %04x, bulk gave %x", math.Float32bits(v), b, got[2*i:2*i+2])
				}
			}
		}
	case from == densewire.Float64:
		vals := make([]float64, len(c.Input))
		for i, h := range c.Input {
			v, _ := strconv.ParseUint(h, 16, 64)
			vals[i] = math.Float64frombits(v)
		}
		tensor, err := densewire.FromFloat64(vals, 1, len(vals), to)
		if err != nil {
			t.Fatal(err)
		}
		got = tensor.Data
		for i, v := range vals {
			if b := math.Float32bits(densewire.Float64ToFloat32(v)); to == densewire.Float32 && uint64(b) != le(got[4*i:4*i+4]) {
				t.Fatalf("Float64ToFloat32 disagrees with the bulk path at %d", i)
			}
		}
	default:
		t.Fatalf("no conversion from %s", from)
	}
	if want := itemsLE(t, c.Output); !bytes.Equal(got, want) {
		t.Fatalf("%s -> %s:\n got %x\nwant %x", from, to, got, want)
	}
}

func le(b []byte) uint64 {
	var v uint64
	for i := len(b) - 1; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}

func checkInvalid(t *testing.T, c *goldenCase) {
	checkCaseError(t, c, invalidCaseError(t, c))
}

// checkCaseError checks the error an invalid case must give: category, and offset and field where
// the case names them.
func checkCaseError(t *testing.T, c *goldenCase, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %s", c.Error)
	}
	var e *densewire.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %T %v is not a *densewire.Error", err, err)
	}
	if string(e.Category) != c.Error {
		t.Fatalf("category %s, want %s (%v)", e.Category, c.Error, err)
	}
	if !errors.Is(err, densewire.Category(c.Error)) {
		t.Fatalf("errors.Is(err, %s) is false", c.Error)
	}
	if c.Offset != nil && e.Offset != *c.Offset {
		t.Fatalf("offset %d, want %d (%v)", e.Offset, *c.Offset, err)
	}
	if c.Field != nil && e.Field != *c.Field {
		t.Fatalf("field %q, want %q (%v)", e.Field, *c.Field, err)
	}
}

// invalidCaseError runs the decode (or encode) an invalid case describes and returns its error.
func invalidCaseError(t *testing.T, c *goldenCase) error {
	if c.Direction == "encode" {
		if c.Format != "json" {
			t.Fatalf("no encoder check for %s", c.Format)
		}
		want := expected(t, c)
		_, err := densewire.EncodeJSON(want, nil, densewire.JSONOptions{EncodingFormat: densewire.EncodingFormat(c.EncodingFormat)})
		return err
	}
	if c.Direction != "decode" {
		t.Fatalf("unknown direction %q", c.Direction)
	}
	var body []byte
	if c.InputHex != nil {
		body = mustHex(t, *c.InputHex)
	} else if c.InputText != nil {
		body = []byte(*c.InputText)
	}
	switch c.Format {
	case "base64":
		dtype, err := densewire.ParseDType(c.DType)
		if err != nil {
			return err
		}
		order, err := densewire.ParseByteOrder(c.ByteOrder)
		if err != nil {
			return err
		}
		_, err = densewire.DecodeBase64(*c.InputText, dtype, c.Shape[0], c.Shape[1], order)
		return err
	case "raw":
		h := http.Header{}
		for k, v := range c.Headers {
			h.Set(k, v)
		}
		_, _, err := densewire.DecodeRaw(h, body)
		return err
	case "msgpack":
		_, _, err := densewire.DecodeMsgpack(body)
		return err
	case "protobuf":
		switch c.Message {
		case "Tensor":
			_, err := densewire.DecodeProtobufTensor(body)
			return err
		case "EmbeddingsResponse":
			_, _, err := densewire.DecodeProtobuf(body)
			return err
		}
		t.Fatalf("unknown message %q", c.Message)
	case "json":
		_, _, err := densewire.DecodeJSON(body)
		return err
	case "arrow":
		_, _, err := arrowipc.Decode(body)
		return err
	}
	t.Fatalf("unsupported format %q", c.Format)
	return nil
}
