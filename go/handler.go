package densewire

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
)

// Server-side helpers (SPEC.md sections 11 and 12) for Go services that answer with tensors.

// DefaultCompressThreshold is the body size from which responses are compressed.
const DefaultCompressThreshold = 1024

// WriteOptions configures WriteTensor.
type WriteOptions struct {
	// Formats offered, in the server's order of preference. Nil offers JSON, raw, MessagePack,
	// Protobuf, and Arrow when package arrowipc is imported.
	Formats []Format
	// JSON is how JSON responses write their rows.
	JSON JSONOptions
	// CompressThreshold is the body size from which a response is compressed (zstd, br or gzip, as
	// Accept-Encoding allows); 0 means DefaultCompressThreshold, a negative value disables compression.
	CompressThreshold int
}

func (o *WriteOptions) formats() []Format {
	if o != nil && o.Formats != nil {
		return o.Formats
	}
	fs := []Format{FormatJSON, FormatRaw, FormatMsgpack, FormatProtobuf}
	if ArrowAvailable() {
		fs = append(fs, FormatArrow)
	}
	return fs
}

// WriteTensor answers r with the tensor in the negotiated format (the format query parameter, else
// Accept), setting Content-Type, Vary: Accept, Accept-Encoding, the raw headers where they apply,
// and, above the threshold, Content-Encoding: zstd, br or gzip, chosen by Accept-Encoding (the
// highest q-value; zstd, then br, then gzip at equal q; none when none is acceptable). When nothing is
// acceptable, or the tensor cannot be written in the chosen format (NaN as a JSON number), it
// answers with the error envelope instead and returns the error.
func WriteTensor(w http.ResponseWriter, r *http.Request, t *Tensor, meta *Meta, opts *WriteOptions) error {
	w.Header().Set("Vary", "Accept, Accept-Encoding")
	offered := opts.formats()
	f, mediaType, err := NegotiateRequest(r, offered)
	if err != nil {
		WriteError(w, err)
		return err
	}
	var jopts JSONOptions
	if opts != nil {
		jopts = opts.JSON
	}
	body, err := Encode(f, t, meta, w.Header(), jopts)
	if err != nil {
		WriteError(w, err)
		return err
	}
	w.Header().Set("Content-Type", mediaType)
	threshold := DefaultCompressThreshold
	if opts != nil && opts.CompressThreshold != 0 {
		threshold = opts.CompressThreshold
	}
	if threshold > 0 && len(body) >= threshold {
		if coding := negotiateEncoding(r.Header.Values("Accept-Encoding")); coding != "" {
			body = compressBody(coding, body)
			w.Header().Set("Content-Encoding", coding)
		}
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, err = w.Write(body)
	}
	return err
}

// responseEncodings are the codings WriteTensor compresses responses in, in its order of preference
// at equal q-values (SPEC.md section 12).
var responseEncodings = [...]string{"zstd", "br", "gzip"}

// negotiateEncoding picks the response coding from the Accept-Encoding header values (RFC 9110
// section 12.5.3): the one of responseEncodings with the highest q-value, named or through "*"
// (x-gzip names gzip), ties in that order; "" (identity) when none has a positive q-value.
func negotiateEncoding(acceptEncoding []string) string {
	named := map[string]float64{}
	star := -1.0
	for _, v := range acceptEncoding {
		for _, part := range strings.Split(v, ",") {
			params := strings.Split(part, ";")
			coding := strings.ToLower(strings.TrimSpace(params[0]))
			if coding == "" {
				continue
			}
			q, valid := qValue(params[1:])
			if !valid {
				q = 0 // an invalid q-value makes the coding unacceptable
			}
			if coding == "x-gzip" {
				coding = "gzip"
			}
			if coding == "*" {
				star = max(star, q)
			} else if old, ok := named[coding]; !ok || q > old {
				named[coding] = q
			}
		}
	}
	best, bestQ := "", 0.0
	for _, coding := range responseEncodings {
		q, ok := named[coding]
		if !ok {
			q = star
		}
		if q > bestQ {
			best, bestQ = coding, q
		}
	}
	return best
}

// zstdEncoder compresses with EncodeAll, which is safe for concurrent use.
var zstdEncoder, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))

// compressBody compresses a response body with fast settings: float data barely compresses, so
// speed matters more than ratio.
func compressBody(coding string, body []byte) []byte {
	var buf bytes.Buffer
	switch coding {
	case "zstd":
		return zstdEncoder.EncodeAll(body, make([]byte, 0, len(body)/2))
	case "br":
		bw := brotli.NewWriterLevel(&buf, 1)
		bw.Write(body)
		bw.Close()
	case "gzip":
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
		zw.Write(body)
		zw.Close()
	default:
		return body
	}
	return buf.Bytes()
}

// errorEnvelope is the OpenAI error envelope with densewire's offset (SPEC.md section 11).
type errorEnvelope struct {
	Error errorBody `json:"error"`
}

type errorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
	Offset  *int    `json:"offset"`
}

// WriteError answers with err as the JSON error envelope of SPEC.md section 11: the status of its
// category, type invalid_request_error (4xx) or server_error (5xx), param = field, code = category
// and offset. An error that is not a densewire *Error is answered 500 without its text.
func WriteError(w http.ResponseWriter, err error) {
	var e *Error
	body := errorBody{Message: "internal server error", Type: "server_error"}
	status := http.StatusInternalServerError
	if errors.As(err, &e) {
		status = e.HTTPStatus()
		body.Message = e.Message
		if e.Field != "" {
			body.Param = &e.Field
			if !strings.HasPrefix(e.Message, e.Field) {
				body.Message = e.Field + ": " + e.Message
			}
		}
		code := string(e.Category)
		body.Code = &code
		if e.Offset >= 0 {
			body.Offset = &e.Offset
		}
		if status < 500 {
			body.Type = "invalid_request_error"
		}
	}
	out, _ := json.Marshal(errorEnvelope{body})
	h := w.Header()
	for _, k := range []string{HeaderVersion, HeaderDType, HeaderShape, HeaderByteorder, HeaderModel, HeaderPromptTokens, HeaderTotalTokens, "Content-Encoding"} {
		h.Del(k)
	}
	h.Set("Content-Type", MediaJSON)
	h.Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(status)
	w.Write(out)
}

// TensorHandler is an http.Handler that computes a tensor per request and answers it in the
// negotiated format. Negotiation happens first, so a request that accepts nothing is answered 406
// without computing anything.
type TensorHandler struct {
	// Tensor computes the answer; a returned *Error is answered with its category's status.
	Tensor func(r *http.Request) (*Tensor, *Meta, error)
	WriteOptions
}

func (h *TensorHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, _, err := NegotiateRequest(r, h.formats()); err != nil {
		w.Header().Set("Vary", "Accept, Accept-Encoding")
		WriteError(w, err)
		return
	}
	t, meta, err := h.Tensor(r)
	if err != nil {
		WriteError(w, err)
		return
	}
	WriteTensor(w, r, t, meta, &h.WriteOptions)
}
