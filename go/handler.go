package densewire

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
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
	// CompressThreshold is the body size from which a response is gzip-compressed when the client
	// accepts gzip; 0 means DefaultCompressThreshold, a negative value disables compression.
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
// and Content-Encoding: gzip above the threshold when Accept-Encoding allows it. When nothing is
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
	if threshold > 0 && len(body) >= threshold && acceptsGzip(r.Header.Values("Accept-Encoding")) {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
		zw.Write(body)
		zw.Close()
		w.Header().Set("Content-Encoding", "gzip")
		body = buf.Bytes()
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, err = w.Write(body)
	}
	return err
}

// acceptsGzip tells whether Accept-Encoding gives gzip a positive q-value (named, or through *).
func acceptsGzip(values []string) bool {
	named, star := -1.0, -1.0
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			params := strings.Split(part, ";")
			coding := strings.ToLower(strings.TrimSpace(params[0]))
			q := 1.0
			for _, p := range params[1:] {
				k, val, _ := strings.Cut(p, "=")
				if strings.EqualFold(strings.TrimSpace(k), "q") {
					if x, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
						q = x
					}
				}
			}
			switch coding {
			case "gzip", "x-gzip":
				named = max(named, q)
			case "*":
				star = max(star, q)
			}
		}
	}
	if named >= 0 {
		return named > 0
	}
	return star > 0
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
