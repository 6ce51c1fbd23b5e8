package densewire_test

import (
	"bytes"
	stdb64 "encoding/base64"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	densewire "github.com/densewire/densewire/go"
	"github.com/densewire/densewire/go/densewirepb"
)

// Fuzz targets for every decoder. Their seed corpus (the golden cases) runs in plain `go test`;
// `go test -fuzz FuzzDecodeX` explores further (ci.sh does a short run of each).

const b64Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

// refDecodeBase64 is SPEC.md section 5 read literally, one character at a time: the reference the
// fast decoder (SIMD plus length prediction) is compared with. It returns the bytes, or the offset
// of the invalid_base64 error.
func refDecodeBase64(s string) ([]byte, int) {
	val := func(c byte) int { return strings.IndexByte(b64Alphabet, c) }
	for i := 0; i < len(s); i++ {
		if val(s[i]) < 0 && s[i] != '=' {
			return nil, i
		}
	}
	body := s
	if p := strings.IndexByte(s, '='); p >= 0 {
		if strings.Trim(s[p:], "=") != "" || len(s)-p > 2 || len(s)%4 != 0 || (p%4 != 2 && p%4 != 3) {
			return nil, p
		}
		body = s[:p]
	} else if len(s)%4 == 1 {
		return nil, len(s) - 1
	}
	var out []byte
	var acc, bits uint
	for i := 0; i < len(body); i++ {
		acc = acc<<6 | uint(val(body[i]))
		bits += 6
		if bits >= 8 {
			bits -= 8
			out = append(out, byte(acc>>bits))
			acc &= 1<<bits - 1
		}
	}
	return out, -1
}

func swapItems(b []byte, w int) []byte {
	out := append([]byte(nil), b...)
	for i := 0; i+w <= len(out); i += w {
		for a, z := i, i+w-1; a < z; a, z = a+1, z-1 {
			out[a], out[z] = out[z], out[a]
		}
	}
	return out
}

// checkDecodeError: every decoder failure is a *densewire.Error of a spec category, with an offset
// inside the input (or -1).
// checkJSONDecode checks a JSON decoder's verdict against encoding/json's: text that is not JSON
// must fail as Malformed, and what decodes must be JSON. It reports whether the body decoded.
func checkJSONDecode(t *testing.T, body []byte, err error) bool {
	t.Helper()
	if err != nil {
		if e := checkDecodeError(t, err, len(body)); !json.Valid(body) && e.Category != densewire.Malformed {
			t.Fatalf("invalid JSON reported as %v", err)
		}
		return false
	}
	if !json.Valid(body) {
		t.Fatal("accepted invalid JSON")
	}
	return true
}

func checkDecodeError(t *testing.T, err error, size int) *densewire.Error {
	t.Helper()
	e, ok := err.(*densewire.Error)
	if !ok {
		t.Fatalf("%T %v is not a *densewire.Error", err, err)
	}
	switch e.Category {
	case densewire.InvalidBase64, densewire.LengthMismatch, densewire.ShapeMismatch, densewire.UnknownDType,
		densewire.Truncated, densewire.Malformed, densewire.InvalidField:
	default:
		t.Fatalf("decoder error category %s", e.Category)
	}
	if e.Offset < -1 || e.Offset > size {
		t.Fatalf("offset %d outside the input of %d: %v", e.Offset, size, e)
	}
	if e.Error() == "" {
		t.Fatal("empty message")
	}
	return e
}

func FuzzDecodeBase64(f *testing.F) {
	for _, c := range loadGolden(f) {
		if c.Format == "base64" && len(c.Shape) == 2 {
			s := c.EncodedText
			if s == nil {
				s = c.InputText
			}
			dt, _ := densewire.ParseDType(c.DType)
			f.Add(*s, uint8(dt), uint16(c.Shape[0]), uint16(c.Shape[1]), c.ByteOrder == "big")
		}
	}
	f.Fuzz(func(t *testing.T, s string, dtype uint8, n, d uint16, big bool) {
		dt := densewire.DType(dtype%7 + 1)
		order := densewire.LittleEndian
		if big {
			order = densewire.BigEndian
		}
		got, err := densewire.DecodeBase64(s, dt, int(n), int(d), order)
		want, off := refDecodeBase64(s)
		if off >= 0 {
			if e := checkDecodeError(t, err, len(s)); e.Category != densewire.InvalidBase64 || e.Offset != off {
				t.Fatalf("%q: %v, want invalid_base64 at %d", s, err, off)
			}
			return
		}
		need := int(n) * dt.RowBytes(int(d))
		if len(want) != need {
			if e := checkDecodeError(t, err, len(s)); e.Category != densewire.LengthMismatch || e.Offset != min(len(want), need) {
				t.Fatalf("%q: %v, want length_mismatch at %d", s, err, min(len(want), need))
			}
			return
		}
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if big {
			want = swapItems(want, dt.ItemSize())
		}
		if !bytes.Equal(got.Data, want) {
			t.Fatalf("%q: %x, want %x", s, got.Data, want)
		}
		if back := densewire.EncodeBase64(got, order); back != stdb64.StdEncoding.EncodeToString(swapIf(big, got.Data, dt.ItemSize())) {
			t.Fatalf("re-encoding differs")
		}
	})
}

func swapIf(big bool, b []byte, w int) []byte {
	if big {
		return swapItems(b, w)
	}
	return b
}

func FuzzDecodeRaw(f *testing.F) {
	for _, c := range loadGolden(f) {
		if c.Format == "raw" {
			body := c.EncodedHex
			if body == nil {
				body = c.InputHex
			}
			b, _ := hex.DecodeString(*body)
			f.Add(c.Headers["Densewire-Dtype"], c.Headers["Densewire-Shape"], c.Headers["Densewire-Byteorder"], b)
		}
	}
	f.Fuzz(func(t *testing.T, dtype, shape, order string, body []byte) {
		h := http.Header{}
		h.Set("Densewire-Dtype", dtype)
		h.Set("Densewire-Shape", shape)
		if order != "" {
			h.Set("Densewire-Byteorder", order)
		}
		tensor, _, err := densewire.DecodeRaw(h, body)
		if err != nil {
			checkDecodeError(t, err, len(body))
			return
		}
		if tensor.DType.String() != dtype || len(tensor.Data) != tensor.N*tensor.RowBytes() {
			t.Fatalf("%+v", tensor)
		}
	})
}

func addBodies(f *testing.F, format string) {
	for _, c := range loadGolden(f) {
		if c.Format != format || c.file == "tables" { // table bodies seed the table fuzz targets
			continue
		}
		switch {
		case c.EncodedHex != nil:
			b, _ := hex.DecodeString(*c.EncodedHex)
			f.Add(b)
		case c.InputHex != nil:
			b, _ := hex.DecodeString(*c.InputHex)
			f.Add(b)
		case c.EncodedText != nil:
			f.Add([]byte(*c.EncodedText))
		case c.InputText != nil:
			f.Add([]byte(*c.InputText))
		}
	}
}

func FuzzDecodeMsgpack(f *testing.F) {
	addBodies(f, "msgpack")
	f.Fuzz(func(t *testing.T, body []byte) {
		tensor, meta, err := densewire.DecodeMsgpack(body)
		if err != nil {
			checkDecodeError(t, err, len(body))
			return
		}
		again, againMeta, err := densewire.DecodeMsgpack(densewire.EncodeMsgpack(tensor, meta))
		if err != nil {
			t.Fatalf("re-encoded body fails: %v", err)
		}
		sameTensor(t, "re-encoded", again, tensor)
		sameMeta(t, "re-encoded", againMeta, meta)
	})
}

// FuzzDecodeProtobuf compares the wire-level decoder with proto.Unmarshal of the generated types:
// a body the official parser rejects must be rejected as malformed or truncated, and a body this
// decoder accepts must read the same there.
func FuzzDecodeProtobuf(f *testing.F) {
	addBodies(f, "protobuf")
	f.Fuzz(func(t *testing.T, body []byte) {
		var msg densewirepb.Tensor
		officialErr := proto.Unmarshal(body, &msg)
		tensor, err := densewire.DecodeProtobufTensor(body)
		if err != nil {
			e := checkDecodeError(t, err, len(body))
			if officialErr != nil && e.Category != densewire.Malformed && e.Category != densewire.Truncated {
				t.Fatalf("proto.Unmarshal fails (%v) but the error is %v", officialErr, err)
			}
		} else {
			if officialErr != nil {
				t.Fatalf("accepted a body proto.Unmarshal rejects: %v", officialErr)
			}
			if int32(msg.Dtype) != int32(tensor.DType) || len(msg.Shape) != 2 || msg.Shape[0] != uint64(tensor.N) ||
				msg.Shape[1] != uint64(tensor.D) || !bytes.Equal(msg.Data, tensor.Data) {
				t.Fatalf("proto.Unmarshal reads %v, we read %+v", &msg, tensor)
			}
		}
		var resp densewirepb.EmbeddingsResponse
		officialErr = proto.Unmarshal(body, &resp)
		rt, meta, err := densewire.DecodeProtobuf(body)
		if err != nil {
			checkDecodeError(t, err, len(body))
			return
		}
		if officialErr != nil {
			t.Fatalf("accepted a response proto.Unmarshal rejects: %v", officialErr)
		}
		if resp.Model != meta.Model || resp.GetUsage().GetPromptTokens() != meta.PromptTokens || !bytes.Equal(resp.GetEmbeddings().GetData(), rt.Data) {
			t.Fatalf("proto.Unmarshal reads %v, we read %+v %+v", &resp, rt, meta)
		}
	})
}

func FuzzDecodeJSON(f *testing.F) {
	addBodies(f, "json")
	f.Fuzz(func(t *testing.T, body []byte) {
		tensor, meta, err := densewire.DecodeJSON(body)
		if !checkJSONDecode(t, body, err) {
			return
		}
		enc, err := densewire.EncodeJSON(tensor, meta, densewire.JSONOptions{EncodingFormat: densewire.EncodingBase64})
		if err != nil {
			t.Fatal(err)
		}
		again, againMeta, err := densewire.DecodeJSON(enc)
		if err != nil {
			t.Fatalf("re-encoded body fails: %v\n%s", err, enc)
		}
		sameTensor(t, "re-encoded", again, tensor)
		sameMeta(t, "re-encoded", againMeta, meta)
	})
}

// The fast Base64 path agrees with the literal reference on random strings built to hit every
// rule, including long ones that go through the AVX2 loop (a deterministic complement to
// FuzzDecodeBase64 that runs on every `go test`).
func TestDecodeBase64MatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	extra := []byte("=\n\r -_*é")
	for i := 0; i < 20000; i++ {
		raw := make([]byte, r.IntN(200))
		for j := range raw {
			raw[j] = byte(r.Uint32())
		}
		s := []byte(stdb64.StdEncoding.EncodeToString(raw))
		if i%3 == 1 {
			s = []byte(strings.TrimRight(string(s), "="))
		}
		for k := r.IntN(3); k > 0 && len(s) > 0; k-- {
			if i%2 == 0 {
				s[r.IntN(len(s))] = extra[r.IntN(len(extra))]
			} else {
				pos := r.IntN(len(s) + 1)
				s = append(s[:pos], append([]byte{extra[r.IntN(len(extra))]}, s[pos:]...)...)
			}
		}
		want, wantOff := refDecodeBase64(string(s))
		n := len(want)
		if wantOff >= 0 {
			n = len(raw)
		}
		got, err := densewire.DecodeBase64(string(s), densewire.Uint8, 1, n, densewire.LittleEndian)
		if wantOff >= 0 {
			e, ok := err.(*densewire.Error)
			if !ok || e.Category != densewire.InvalidBase64 || e.Offset != wantOff {
				t.Fatalf("%q: got %v, want invalid_base64 at %d", s, err, wantOff)
			}
			continue
		}
		if err != nil || !bytes.Equal(got.Data, want) {
			t.Fatalf("%q: got %v %v, want %x", s, got, err, want)
		}
	}
}
