package densewire

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
	"golang.org/x/sync/errgroup"
)

// The tables API (SPEC.md section 15.9): GET /v1/tables and GET /v1/tables/{name}.

// TableInfo is one table of GET /v1/tables.
type TableInfo struct {
	Name        string
	Rows        int
	Columns     []ColumnSpec
	Version     string    // opaque; changes when the data does
	RefreshedAt time.Time // zero when the server sent none
	Formats     []string  // the format names the server offers for it
}

// ListTables calls GET {BaseURL}/v1/tables. A column type the server names but this library does
// not know is an UnknownDType error on data[i].columns[j].type.
func (c *Client) ListTables(ctx context.Context) ([]TableInfo, error) {
	body, err := c.getJSON(ctx, "/v1/tables")
	if err != nil {
		return nil, err
	}
	var list struct {
		Data []struct {
			Name    string `json:"name"`
			Rows    int    `json:"rows"`
			Columns []struct {
				Name string `json:"name"`
				Type string `json:"type"`
			} `json:"columns"`
			Version     string   `json:"version"`
			RefreshedAt string   `json:"refreshed_at"`
			Formats     []string `json:"formats"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		e := newError(Malformed, "", -1, "GET /v1/tables answered invalid JSON: "+err.Error())
		e.Err = err
		return nil, e
	}
	out := make([]TableInfo, len(list.Data))
	for i, d := range list.Data {
		info := TableInfo{Name: d.Name, Rows: d.Rows, Version: d.Version, Formats: d.Formats, Columns: make([]ColumnSpec, len(d.Columns))}
		for j, col := range d.Columns {
			typ, dims, err := ParseColumnType(col.Type)
			if err != nil {
				e := err.(*Error)
				e.Field = "data[" + strconv.Itoa(i) + "].columns[" + strconv.Itoa(j) + "].type"
				return nil, e
			}
			info.Columns[j] = ColumnSpec{Name: col.Name, Type: typ, Dimensions: dims}
		}
		if d.RefreshedAt != "" {
			ts, err := time.Parse(time.RFC3339Nano, d.RefreshedAt)
			if err != nil {
				return nil, newError(InvalidField, "data["+strconv.Itoa(i)+"].refreshed_at", -1, "refreshed_at is not an RFC 3339 time: "+strconv.Quote(d.RefreshedAt))
			}
			info.RefreshedAt = ts
		}
		out[i] = info
	}
	return out, nil
}

// GetTableOptions are the options of GetTable. The zero value asks for Protobuf first.
type GetTableOptions struct {
	// Formats are the formats to accept, best first (sent as Accept with falling q-values); nil
	// means Protobuf, MessagePack, Arrow (only with package arrowipc imported), JSON columns, CSV,
	// JSON objects.
	Formats []TableFormat
	// Format, when set, is sent as the format query parameter, which overrides Accept.
	Format TableFormat
	// IfNoneMatch is an ETag of an earlier answer: if the table has not changed, the server answers
	// 304 and GetTable returns a result with NotModified set and no Table.
	IfNoneMatch string
}

// TableResult is the answer of GetTable.
type TableResult struct {
	Table           *Table // nil when NotModified
	NotModified     bool
	ETag            string // the strong ETag of this representation, for IfNoneMatch
	LastModified    string
	Format          TableFormat
	ContentEncoding string // the coding the body came in (zstd, br, gzip), "" for none
	WireBytes       int    // the body's size as received, before decompression
}

// TableAccept returns the Accept value GetTable sends for these formats (nil: the defaults).
func TableAccept(formats []TableFormat) (string, error) {
	if formats == nil {
		formats = []TableFormat{TableProtobuf, TableMsgpack}
		if enc, dec := arrowTableCodec(); enc != nil && dec != nil {
			formats = append(formats, TableArrow)
		}
		formats = append(formats, TableJSONColumns, TableCSV, TableJSON)
	}
	parts := make([]string, 0, len(formats))
	for i, f := range formats {
		if !f.valid() {
			return "", newError(InvalidField, "Formats", -1, "unknown table format "+f.String())
		}
		if f == TableArrow {
			if _, dec := arrowTableCodec(); dec == nil {
				return "", arrowMissing()
			}
		}
		mt := f.MediaType()
		if i > 0 {
			q := max(1000-100*i, 1)
			mt += ";q=" + strconv.FormatFloat(float64(q)/1000, 'f', -1, 64)
		}
		parts = append(parts, mt)
	}
	return strings.Join(parts, ", "), nil
}

// acceptEncoding is what the table requests offer: every coding the spec's servers write.
const acceptEncoding = "zstd, br, gzip"

// GetTable calls GET {BaseURL}/v1/tables/{name} and decodes the table in whatever format the
// server chose (by Content-Type; the JSON objects layout and CSV typed by Densewire-Columns). It
// asks for zstd, br or gzip compression and decompresses (at most MaxResponseBytes). A 304 answer to
// IfNoneMatch is a result with NotModified. A server's error answer is an *Error with its Status and
// code (404 not_found for an unknown table); a cancelled ctx gives ctx.Err().
func (c *Client) GetTable(ctx context.Context, name string, opts *GetTableOptions) (*TableResult, error) {
	if opts == nil {
		opts = &GetTableOptions{}
	}
	if name == "" {
		return nil, newError(InvalidField, "name", -1, "empty table name")
	}
	accept, err := TableAccept(opts.Formats)
	if err != nil {
		return nil, err
	}
	path := "/v1/tables/" + url.PathEscape(name)
	if opts.Format != 0 {
		if !opts.Format.valid() {
			return nil, newError(InvalidField, "format", -1, "unknown table format "+opts.Format.String())
		}
		path += "?format=" + opts.Format.String()
	}
	req, err := c.newRequest(ctx, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", accept)
	if req.Header.Get("Accept-Encoding") == "" {
		req.Header.Set("Accept-Encoding", acceptEncoding)
	}
	if opts.IfNoneMatch != "" {
		req.Header.Set("If-None-Match", opts.IfNoneMatch)
	}
	resp, body, err := c.do(req)
	if err != nil {
		return nil, err
	}
	res := &TableResult{ETag: resp.Header.Get("ETag"), LastModified: resp.Header.Get("Last-Modified"), WireBytes: len(body)}
	if resp.StatusCode == http.StatusNotModified {
		res.NotModified = true
		return res, nil
	}
	if body, err = c.decompress(resp, body); err != nil {
		return nil, err
	}
	if !resp.Uncompressed {
		res.ContentEncoding = strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Encoding")))
	}
	ct := resp.Header.Get("Content-Type")
	f, ok := TableFormatOf(ct)
	if !ok {
		return nil, newError(UnsupportedMediaType, "Content-Type", -1, "the server answered with a Content-Type that is no table format: "+strconv.Quote(ct))
	}
	res.Format = f
	t, err := DecodeTableResponse(resp.Header, body)
	if err != nil {
		return nil, err
	}
	res.Table = t
	return res, nil
}

// GetTables fetches several tables concurrently, at most Concurrency (0: 4) requests in flight,
// with the same options; results are in the order of names. The first failure cancels the other
// requests and is returned.
func (c *Client) GetTables(ctx context.Context, names []string, opts *GetTableOptions) ([]*TableResult, error) {
	out := make([]*TableResult, len(names))
	g, gctx := errgroup.WithContext(ctx)
	limit := c.Concurrency
	if limit <= 0 {
		limit = 4
	}
	g.SetLimit(limit)
	for i, name := range names {
		g.Go(func() error {
			r, err := c.GetTable(gctx, name, opts)
			out[i] = r
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// getJSON GETs path from the server, asking for JSON, and returns the (decompressed) body.
func (c *Client) getJSON(ctx context.Context, path string) ([]byte, error) {
	req, err := c.newRequest(ctx, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", MediaJSON)
	_, body, err := c.do(req)
	return body, err
}

// newRequest builds a request to the server with the client's headers and API key.
func (c *Client) newRequest(ctx context.Context, method, path string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.BaseURL, "/")+path, body)
	if err != nil {
		return nil, err
	}
	for k, vs := range c.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	return req, nil
}

// decompress undoes the response's Content-Encoding (zstd, br, gzip, identity), reading at most
// MaxResponseBytes of output, so that no bomb is inflated in full.
func (c *Client) decompress(resp *http.Response, body []byte) ([]byte, error) {
	coding := strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Encoding")))
	if coding == "" || coding == "identity" || resp.Uncompressed {
		return body, nil
	}
	var r io.Reader
	switch coding {
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, decodingError(coding, err)
		}
		r = zr
	case "zstd":
		zr, err := zstd.NewReader(bytes.NewReader(body), zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, decodingError(coding, err)
		}
		defer zr.Close()
		r = zr
	case "br":
		r = brotli.NewReader(bytes.NewReader(body))
	default:
		return nil, newError(UnsupportedMediaType, "Content-Encoding", -1, "the server answered in an unknown Content-Encoding "+strconv.Quote(coding))
	}
	limit := c.MaxResponseBytes
	if limit <= 0 {
		limit = 1 << 30
	}
	var buf bytes.Buffer
	buf.Grow(min(4*len(body), int(limit)))
	if _, err := buf.ReadFrom(io.LimitReader(r, limit+1)); err != nil {
		return nil, decodingError(coding, err)
	}
	if int64(buf.Len()) > limit {
		return nil, newError(PayloadTooLarge, "", -1, "the decompressed response is larger than "+strconv.FormatInt(limit, 10)+" bytes")
	}
	out := buf.Bytes()
	// a fresh, 8-byte aligned copy when the buffer's start is not (for the column views)
	if !aligned(out, 8) {
		out = append(make([]byte, 0, len(out)), out...)
	}
	return out, nil
}

// decompressError is the body of an error answer, decompressed when possible.
func (c *Client) decompressError(resp *http.Response, body []byte) []byte {
	if out, err := c.decompress(resp, body); err == nil {
		return out
	}
	return body
}

func decodingError(coding string, err error) *Error {
	e := newError(Malformed, "Content-Encoding", -1, "the "+coding+" response body does not decompress: "+err.Error())
	e.Err = err
	return e
}
