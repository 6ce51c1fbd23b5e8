package densewire

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"golang.org/x/sync/errgroup"
)

// Client calls an embeddings API (POST {BaseURL}/v1/embeddings, SPEC.md sections 6 and 12): a
// densewire server, or any OpenAI-compatible one (which answers JSON whatever Accept says). It
// splits large inputs into batches sent concurrently, asks for the fastest body format it can
// decode, and decodes whatever format the server chose by its Content-Type.
//
// The zero value is not usable: set BaseURL. A Client is safe for concurrent use.
type Client struct {
	// BaseURL is the server's root, such as "http://localhost:8000"; "/v1/embeddings" is appended.
	BaseURL string
	// APIKey, when set, is sent as "Authorization: Bearer APIKey".
	APIKey string
	// HTTPClient sends the requests; nil means http.DefaultClient. Its Transport asks for and
	// decompresses gzip by itself.
	HTTPClient *http.Client
	// Formats are the response formats to accept, best first; nil means raw, MessagePack,
	// Protobuf, JSON (Arrow only when listed, and only with package arrowipc imported).
	Formats []Format
	// BatchSize is the most inputs per request; 0 means 512 (the API allows up to 2048).
	BatchSize int
	// Concurrency is the most requests in flight; 0 means 4.
	Concurrency int
	// Header holds extra request headers.
	Header http.Header
	// MaxResponseBytes bounds the size of one response body; 0 means 1 GiB. A larger body is a
	// PayloadTooLarge error.
	MaxResponseBytes int64
	// Retry says which failed requests are sent again and how long to wait (see RetryPolicy); nil
	// means DefaultRetryPolicy (2 retries), &RetryPolicy{} none.
	Retry *RetryPolicy
}

// EmbeddingsRequest is the request body of SPEC.md section 6.1 (input as strings).
type EmbeddingsRequest struct {
	Input      []string // the texts; none empty
	Model      string   // "" means the server's default model
	Dimensions int      // 0 means the model's
	// DType asks the server for this element type; 0 or Float32 sends nothing (the default), so
	// that requests stay valid for OpenAI-compatible servers. Int8 and Uint8 answers carry the
	// quantization id of their ranges in Meta.Quantization (SPEC.md section 17).
	DType DType
	// Dequantize, with DType Int8 or Uint8, returns float32 rows: the codes dequantized with the
	// ranges the answer's quantization id names (fetched once per id: Client.Quantization). The
	// wire carries the 1-byte codes; Meta.Quantization still names the ranges.
	Dequantize bool
	// Truncate false asks the server to reject over-long inputs instead of cutting them.
	Truncate *bool
	User     string
}

type wireRequest struct {
	Input          []string `json:"input"`
	Model          string   `json:"model,omitempty"`
	EncodingFormat string   `json:"encoding_format"`
	Dimensions     int      `json:"dimensions,omitempty"`
	DType          string   `json:"dtype,omitempty"`
	Truncate       *bool    `json:"truncate,omitempty"`
	User           string   `json:"user,omitempty"`
}

// Accept returns the Accept header value the client sends: its formats with falling q-values.
func (c *Client) Accept() (string, error) {
	formats := c.Formats
	if formats == nil {
		formats = []Format{FormatRaw, FormatMsgpack, FormatProtobuf, FormatJSON}
	}
	var parts []string
	for i, f := range formats {
		if f < FormatJSON || f > FormatArrow {
			return "", newError(InvalidField, "Formats", -1, "unknown format "+f.String())
		}
		if f == FormatArrow && !ArrowAvailable() {
			return "", arrowMissing()
		}
		mt := f.MediaType()
		if q := 1000 - 100*i; i > 0 {
			if q < 1 {
				q = 1
			}
			mt += ";q=" + strconv.FormatFloat(float64(q)/1000, 'f', -1, 64)
		}
		parts = append(parts, mt)
	}
	return strings.Join(parts, ", "), nil
}

// Embed embeds req.Input and returns the (len(Input), d) tensor, rows in input order, with the
// model and the token usage summed over the batches. Batches of BatchSize inputs are sent with at
// most Concurrency in flight; the first failure cancels the others and is returned. A server's
// error answer is an *Error with its Status, and its code as Category (param as Field, offset as
// Offset; a param input[k] of a batch is renumbered to the index in req.Input); a body that fails
// to decode is the decoder's *Error; a cancelled or expired ctx gives ctx.Err() (errors.Is works).
func (c *Client) Embed(ctx context.Context, req *EmbeddingsRequest) (*Tensor, *Meta, error) {
	if len(req.Input) == 0 {
		return nil, nil, newError(InvalidField, "input", -1, "input is empty")
	}
	if req.DType != 0 && !req.DType.Valid() {
		return nil, nil, newError(UnknownDType, "dtype", -1, "invalid dtype "+req.DType.String())
	}
	if req.Dequantize && req.DType != Int8 && req.DType != Uint8 {
		return nil, nil, newError(InvalidField, "dtype", -1, "Dequantize needs DType int8 or uint8, not "+req.DType.String())
	}
	accept, err := c.Accept()
	if err != nil {
		return nil, nil, err
	}
	size := c.BatchSize
	if size <= 0 {
		size = 512
	}
	var batches [][]string
	for i := 0; i < len(req.Input); i += size {
		batches = append(batches, req.Input[i:min(i+size, len(req.Input))])
	}
	type result struct {
		t    *Tensor
		meta *Meta
	}
	results := make([]result, len(batches))
	g, gctx := errgroup.WithContext(ctx)
	limit := c.Concurrency
	if limit <= 0 {
		limit = 4
	}
	g.SetLimit(limit)
	for i, batch := range batches {
		g.Go(func() error {
			t, meta, err := c.post(gctx, req, batch, accept)
			if err != nil {
				return shiftInputIndex(err, i*size)
			}
			if t.N != len(batch) {
				return newError(ShapeMismatch, "data", -1, fmt.Sprintf("the server answered %d rows for %d inputs", t.N, len(batch)))
			}
			if req.Dequantize {
				if t, err = c.dequantizeAnswer(gctx, t, meta); err != nil {
					return err
				}
			}
			results[i] = result{t, meta}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	if len(results) == 1 {
		return results[0].t, orEmpty(results[0].meta), nil
	}
	first := results[0].t
	total := 0
	meta := &Meta{}
	for i, r := range results {
		if r.t.DType != first.DType || r.t.D != first.D {
			return nil, nil, newError(ShapeMismatch, "data", -1, fmt.Sprintf("batch %d is (%d, %d) %s, batch 0 is (%d, %d) %s",
				i, r.t.N, r.t.D, r.t.DType, first.N, first.D, first.DType))
		}
		total += len(r.t.Data)
		if q, q0 := orEmpty(r.meta).Quantization, orEmpty(results[0].meta).Quantization; q != q0 {
			return nil, nil, newError(InvalidField, "quantization", -1, fmt.Sprintf("batch %d was quantized with %q, batch 0 with %q",
				i, q, q0))
		}
		if r.meta != nil {
			meta.Quantization = r.meta.Quantization
			if meta.Model == "" {
				meta.Model = r.meta.Model
			}
			meta.PromptTokens += r.meta.PromptTokens
			meta.TotalTokens += r.meta.TotalTokens
		}
	}
	data := make([]byte, 0, total)
	for _, r := range results {
		data = append(data, r.t.Data...)
	}
	return &Tensor{DType: first.DType, N: len(req.Input), D: first.D, Data: data}, meta, nil
}

// shiftInputIndex rewrites a server error about input[k] of a batch into input[first+k] of the
// whole request, so that the error names the caller's input.
func shiftInputIndex(err error, first int) error {
	e, ok := err.(*Error)
	if !ok || first == 0 || !strings.HasPrefix(e.Field, "input[") {
		return err
	}
	end := strings.IndexByte(e.Field, ']')
	k, convErr := strconv.Atoi(e.Field[len("input["):max(end, len("input["))])
	if end < 0 || convErr != nil {
		return err
	}
	old := e.Field[:end+1]
	field := "input[" + strconv.Itoa(first+k) + "]"
	shifted := *e
	shifted.Field = field + e.Field[end+1:]
	shifted.Message = strings.Replace(e.Message, old, field, 1)
	return &shifted
}

func orEmpty(m *Meta) *Meta {
	if m == nil {
		return &Meta{}
	}
	return m
}

// postJSON posts v as a JSON body to path asking for accept; the answer as do gives it (retries,
// errors by status).
func (c *Client) postJSON(ctx context.Context, path string, v any, accept string) (*http.Response, []byte, error) {
	payload, err := json.Marshal(v)
	if err != nil {
		return nil, nil, err
	}
	hreq, err := c.newRequest(ctx, http.MethodPost, path, bytes.NewReader(payload))
	if err != nil {
		return nil, nil, err
	}
	hreq.Header.Set("Content-Type", MediaJSON)
	hreq.Header.Set("Accept", accept)
	return c.do(hreq)
}

// kindFormat is the format of a per-token or sparse answer by its Content-Type: tei for TEI's JSON
// (or no Content-Type), else one of densewire's binary formats.
func kindFormat(h http.Header) (f Format, tei bool, err error) {
	ct := h.Get("Content-Type")
	f, ok := FormatOf(ct)
	if !ok && ct != "" {
		return 0, false, newError(UnsupportedMediaType, "Content-Type", -1, "the server answered with an unknown Content-Type "+strconv.Quote(ct))
	}
	return f, !ok || f == FormatJSON, nil
}

// post sends one batch and decodes the answer.
func (c *Client) post(ctx context.Context, req *EmbeddingsRequest, input []string, accept string) (*Tensor, *Meta, error) {
	wr := wireRequest{Input: input, Model: req.Model, EncodingFormat: "base64", Dimensions: req.Dimensions,
		Truncate: req.Truncate, User: req.User}
	if req.DType != 0 && req.DType != Float32 {
		wr.DType = req.DType.String()
	}
	resp, body, err := c.postJSON(ctx, "/v1/embeddings", wr, accept)
	if err != nil {
		return nil, nil, err
	}
	ct := resp.Header.Get("Content-Type")
	f, ok := FormatOf(ct)
	if !ok {
		if ct == "" {
			f = FormatJSON // some servers omit it; the body says what it is
		} else {
			return nil, nil, newError(UnsupportedMediaType, "Content-Type", -1, "the server answered with an unknown Content-Type "+strconv.Quote(ct))
		}
	}
	return Decode(f, resp.Header, body)
}

// readBody reads a response body, at most limit bytes, into one allocation when its length is
// known (the buffer is then aligned for ViewFloat32).
func readBody(resp *http.Response, limit int64) ([]byte, error) {
	if limit <= 0 {
		limit = 1 << 30
	}
	tooLarge := newError(PayloadTooLarge, "", -1, "the response body is larger than "+strconv.FormatInt(limit, 10)+" bytes")
	if n := resp.ContentLength; n >= 0 && !resp.Uncompressed {
		if n > limit {
			return nil, tooLarge
		}
		buf := make([]byte, n)
		if _, err := io.ReadFull(resp.Body, buf); err != nil {
			return nil, err
		}
		return buf, nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err == nil && int64(len(body)) > limit {
		return nil, tooLarge
	}
	return body, err
}

// ParseErrorResponse turns an error answer into an *Error: from the OpenAI error envelope
// ({"error": {"message", "type", "param", "code", "offset"}}) when the body is one, else from the
// status alone. Status is always set.
func ParseErrorResponse(status int, body []byte) *Error {
	e := &Error{Status: status, Offset: -1, Category: categoryForStatus(status)}
	var env struct {
		Error *struct {
			Message string          `json:"message"`
			Type    string          `json:"type"`
			Param   *string         `json:"param"`
			Code    json.RawMessage `json:"code"`
			Offset  *int            `json:"offset"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &env) == nil && env.Error != nil {
		e.Message = env.Error.Message
		if env.Error.Param != nil {
			e.Field = *env.Error.Param
		}
		var code string
		if json.Unmarshal(env.Error.Code, &code) == nil && code != "" {
			e.Category = Category(code)
		}
		if env.Error.Offset != nil {
			e.Offset = *env.Error.Offset
		}
		return e
	}
	msg := strings.TrimSpace(string(body))
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	e.Message = msg
	return e
}
