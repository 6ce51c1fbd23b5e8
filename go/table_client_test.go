package densewire_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"

	densewire "github.com/densewire/densewire/go"
)

// tableServer answers GET /v1/tables and GET /v1/tables/{name} (SPEC.md section 15.9) with the
// golden bodies of one table, with the headers of section 15.2, ETags per format and coding, and
// compression when asked for.
type tableServer struct {
	name     string
	bodies   map[densewire.TableFormat][]byte
	headers  map[string]string
	compress string        // the coding to answer in when the client accepts it
	hold     chan struct{} // when set, each table request waits on it

	mu        sync.Mutex
	accepts   []string
	queries   []string
	encodings []string
	inflight  int
	maxFlight int
}

func newTableServer(t *testing.T, id string) *tableServer {
	s := &tableServer{bodies: map[densewire.TableFormat][]byte{}}
	for _, c := range loadGolden(t) {
		if c.file != "tables" || c.Direction != "" || !strings.HasSuffix(c.ID, "."+id) || strings.Contains(c.ID, ".plain.") {
			continue
		}
		f := tableFormatOfCase[c.Format]
		s.bodies[f] = goldenBody(t, &c)
		s.headers, s.name = c.Headers, c.Table
	}
	if len(s.bodies) != 7 {
		t.Fatalf("golden %s: %d formats", id, len(s.bodies))
	}
	return s
}

func (s *tableServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v1/tables" {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"object":"list","data":[{"object":"table","name":"` + s.name + `","rows":4,"columns":[{"name":"flag","type":"bool"},` +
			`{"name":"embedding","type":"float32[3]"}],"version":"v7","refreshed_at":"2026-01-02T03:04:05.5Z","formats":["json","protobuf"]}]}`))
		return
	}
	name, ok := strings.CutPrefix(r.URL.EscapedPath(), "/v1/tables/")
	if !ok || name != strings.ReplaceAll(s.name, " ", "%20") {
		densewire.WriteError(w, &densewire.Error{Category: densewire.NotFound, Field: "name", Offset: -1, Message: "no table " + name})
		return
	}
	s.mu.Lock()
	s.accepts = append(s.accepts, r.Header.Get("Accept"))
	s.queries = append(s.queries, r.URL.RawQuery)
	s.encodings = append(s.encodings, r.Header.Get("Accept-Encoding"))
	s.inflight++
	s.maxFlight = max(s.maxFlight, s.inflight)
	s.mu.Unlock()
	defer func() { s.mu.Lock(); s.inflight--; s.mu.Unlock() }()
	if s.hold != nil {
		select {
		case <-s.hold:
		case <-r.Context().Done():
			return
		}
	}
	// the format: ?format=, else the first Accept entry we have a body for (the client lists its
	// preferences first)
	var f densewire.TableFormat
	if q := r.URL.Query().Get("format"); q != "" {
		var err error
		if f, err = densewire.ParseTableFormat(q); err != nil {
			densewire.WriteError(w, err)
			return
		}
	} else {
		for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
			if g, ok := densewire.TableFormatOf(part); ok {
				f = g
				break
			}
		}
	}
	if f == 0 {
		densewire.WriteError(w, &densewire.Error{Category: densewire.NotAcceptable, Field: "Accept", Offset: -1, Message: "nothing acceptable"})
		return
	}
	body := s.bodies[f]
	coding := ""
	if s.compress != "" && strings.Contains(r.Header.Get("Accept-Encoding"), s.compress) {
		coding = s.compress
	}
	etag := `"v7-` + f.String() + "-" + coding + `"`
	h := w.Header()
	for k, v := range s.headers {
		h.Set(k, v)
	}
	h.Set("Densewire-Version", "1")
	h.Set("Vary", "Accept, Accept-Encoding")
	h.Set("ETag", etag)
	h.Set("Last-Modified", "Fri, 02 Jan 2026 03:04:05 GMT")
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", f.MediaType())
	if f == densewire.TableCSV {
		h.Set("Content-Type", "text/csv; charset=utf-8; header=present")
	}
	if coding != "" {
		var buf bytes.Buffer
		switch coding {
		case "zstd":
			zw, _ := zstd.NewWriter(&buf)
			zw.Write(body)
			zw.Close()
		case "br":
			bw := brotli.NewWriter(&buf)
			bw.Write(body)
			bw.Close()
		case "gzip":
			gw := gzip.NewWriter(&buf)
			gw.Write(body)
			gw.Close()
		}
		body = buf.Bytes()
		h.Set("Content-Encoding", coding)
	}
	w.Write(body)
}

func goldenTable(t *testing.T, id string) *densewire.Table {
	for _, c := range loadGolden(t) {
		if c.ID == id {
			return expectedTable(t, &c)
		}
	}
	t.Fatalf("no golden case %s", id)
	return nil
}

// Every format, asked for alone by Accept, decodes to the golden table; the default Accept asks
// for Protobuf first.
func TestGetTableEveryFormat(t *testing.T) {
	ts := newTableServer(t, "all_types")
	srv := httptest.NewServer(ts)
	defer srv.Close()
	want := goldenTable(t, "table.protobuf.bss.all_types")
	client := &densewire.Client{BaseURL: srv.URL}
	for _, f := range densewire.AllTableFormats {
		res, err := client.GetTable(context.Background(), want.Name, &densewire.GetTableOptions{Formats: []densewire.TableFormat{f}})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if res.Format != f || res.NotModified || res.ETag != `"v7-`+f.String()+`-"` {
			t.Fatalf("%s: %+v", f, res)
		}
		sameTable(t, f.String(), res.Table, want)
	}
	res, err := client.GetTable(context.Background(), want.Name, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Format != densewire.TableProtobuf {
		t.Fatalf("default format %s", res.Format)
	}
	sameTable(t, "default", res.Table, want)
	got := ts.accepts[len(ts.accepts)-1]
	if want := "application/protobuf, application/vnd.msgpack;q=0.9, application/vnd.apache.arrow.stream;q=0.8, " +
		"application/vnd.densewire.columns+json;q=0.7, text/csv;q=0.6, application/json;q=0.5"; got != want {
		t.Fatalf("Accept %q, want %q", got, want)
	}
	if enc := ts.encodings[len(ts.encodings)-1]; enc != "zstd, br, gzip" {
		t.Fatalf("Accept-Encoding %q", enc)
	}
	// ?format= is sent when asked for
	if res, err = client.GetTable(context.Background(), want.Name, &densewire.GetTableOptions{Format: densewire.TableJSONRows}); err != nil {
		t.Fatal(err)
	}
	if res.Format != densewire.TableJSONRows || ts.queries[len(ts.queries)-1] != "format=json-rows" {
		t.Fatalf("format %s, query %q", res.Format, ts.queries[len(ts.queries)-1])
	}
}

func TestGetTableCompressionAndETag(t *testing.T) {
	ts := newTableServer(t, "points")
	srv := httptest.NewServer(ts)
	defer srv.Close()
	want := goldenTable(t, "table.protobuf.bss.points")
	client := &densewire.Client{BaseURL: srv.URL}
	for _, coding := range []string{"zstd", "br", "gzip"} {
		ts.compress = coding
		for _, f := range []densewire.TableFormat{densewire.TableProtobuf, densewire.TableCSV, densewire.TableJSON} {
			res, err := client.GetTable(context.Background(), "points", &densewire.GetTableOptions{Formats: []densewire.TableFormat{f}})
			if err != nil {
				t.Fatalf("%s %s: %v", coding, f, err)
			}
			if res.ContentEncoding != coding || res.WireBytes == 0 {
				t.Fatalf("coding %q", res.ContentEncoding)
			}
			sameTable(t, coding+" "+f.String(), res.Table, want)
			// revalidation: the same ETag answers 304, no table
			again, err := client.GetTable(context.Background(), "points", &densewire.GetTableOptions{Formats: []densewire.TableFormat{f}, IfNoneMatch: res.ETag})
			if err != nil {
				t.Fatal(err)
			}
			if !again.NotModified || again.Table != nil || again.ETag != res.ETag {
				t.Fatalf("%s %s: revalidation gave %+v", coding, f, again)
			}
		}
	}
	// a decompression bomb stops at MaxResponseBytes
	ts.compress = "zstd"
	small := &densewire.Client{BaseURL: srv.URL, MaxResponseBytes: 100}
	if _, err := small.GetTable(context.Background(), "points", &densewire.GetTableOptions{Formats: []densewire.TableFormat{densewire.TableJSON}}); !errors.Is(err, densewire.PayloadTooLarge) {
		t.Fatalf("over the limit: %v", err)
	}
}

func TestGetTableErrors(t *testing.T) {
	srv := httptest.NewServer(newTableServer(t, "points"))
	defer srv.Close()
	client := &densewire.Client{BaseURL: srv.URL}
	_, err := client.GetTable(context.Background(), "nope", nil)
	var e *densewire.Error
	if !errors.As(err, &e) || e.Category != densewire.NotFound || e.Status != 404 || e.Field != "name" || !strings.Contains(e.Message, "no table nope") {
		t.Fatalf("unknown table: %v", err)
	}
	if _, err := client.GetTable(context.Background(), "", nil); !errors.Is(err, densewire.InvalidField) {
		t.Fatalf("empty name: %v", err)
	}
	if _, err := client.GetTable(context.Background(), "points", &densewire.GetTableOptions{Formats: []densewire.TableFormat{99}}); !errors.Is(err, densewire.InvalidField) {
		t.Fatalf("bad format: %v", err)
	}
	// a server that answers something else than a table
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write([]byte("x"))
	}))
	defer other.Close()
	if _, err := (&densewire.Client{BaseURL: other.URL}).GetTable(context.Background(), "points", nil); !errors.Is(err, densewire.UnsupportedMediaType) {
		t.Fatalf("image/png: %v", err)
	}
}

func TestListTables(t *testing.T) {
	srv := httptest.NewServer(newTableServer(t, "all_types"))
	defer srv.Close()
	list, err := (&densewire.Client{BaseURL: srv.URL}).ListTables(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Name != "every type" || list[0].Rows != 4 || list[0].Version != "v7" ||
		list[0].Columns[1] != (densewire.ColumnSpec{Name: "embedding", Type: densewire.ColumnFloat32Vector, Dimensions: 3}) ||
		!list[0].RefreshedAt.Equal(time.Date(2026, 1, 2, 3, 4, 5, 5e8, time.UTC)) || len(list[0].Formats) != 2 {
		t.Fatalf("%+v", list)
	}
}

// GetTables keeps at most Concurrency requests in flight, and a cancelled context stops them all.
func TestGetTablesConcurrencyAndCancel(t *testing.T) {
	ts := newTableServer(t, "points")
	ts.hold = make(chan struct{})
	srv := httptest.NewServer(ts)
	defer srv.Close()
	client := &densewire.Client{BaseURL: srv.URL, Concurrency: 2}
	names := []string{"points", "points", "points", "points", "points"}
	var done atomic.Bool
	go func() {
		for !done.Load() {
			time.Sleep(5 * time.Millisecond)
			select {
			case ts.hold <- struct{}{}:
			default:
			}
		}
	}()
	res, err := client.GetTables(context.Background(), names, nil)
	done.Store(true)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 5 || res[4].Table.Rows != 3 {
		t.Fatalf("%+v", res)
	}
	if ts.maxFlight < 1 || ts.maxFlight > 2 {
		t.Fatalf("%d requests in flight, limit 2", ts.maxFlight)
	}
	// nothing is released: the requests wait until the context is cancelled
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	_, err = client.GetTables(ctx, names, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Fatal("cancellation did not stop the requests")
	}
	// an error cancels the other requests
	_, err = client.GetTables(context.Background(), []string{"points", "nope", "points"}, nil)
	if !errors.Is(err, densewire.NotFound) {
		t.Fatalf("one unknown table: %v", err)
	}
}

// Against the real server (scripts/test.sh starts one and sets DENSEWIRE_SERVER_URL): the demo
// table points, 67,627 rows of uuid, status int32, longitude and latitude float64, read in every
// format the server offers, all alike, and revalidated by ETag.
func TestLiveTables(t *testing.T) {
	base := os.Getenv("DENSEWIRE_SERVER_URL")
	if base == "" {
		t.Skip("DENSEWIRE_SERVER_URL is not set (scripts/test.sh sets it): the live tables test needs a running densewire serve")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := &densewire.Client{BaseURL: base, APIKey: os.Getenv("DENSEWIRE_API_KEY")}
	list, err := client.ListTables(ctx)
	if err != nil {
		t.Fatalf("GET /v1/tables: %v", err)
	}
	wantSchema := []densewire.ColumnSpec{{Name: "uuid", Type: densewire.ColumnUUID}, {Name: "status", Type: densewire.ColumnInt32},
		{Name: "longitude", Type: densewire.ColumnFloat64}, {Name: "latitude", Type: densewire.ColumnFloat64}}
	found := false
	for _, info := range list {
		if info.Name == "points" {
			found = true
			if info.Rows != 67627 || len(info.Columns) != 4 {
				t.Fatalf("points: %+v", info)
			}
			for i, c := range wantSchema {
				if info.Columns[i] != c {
					t.Fatalf("points columns %+v", info.Columns)
				}
			}
		}
	}
	if !found {
		t.Fatalf("GET /v1/tables has no table points: %+v", list)
	}
	ref, err := client.GetTable(ctx, "points", nil)
	if err != nil {
		t.Fatalf("GET /v1/tables/points: %v", err)
	}
	if ref.Format != densewire.TableProtobuf || ref.Table.Rows != 67627 || ref.ETag == "" {
		t.Fatalf("default GET: format %s, %d rows, ETag %q", ref.Format, ref.Table.Rows, ref.ETag)
	}
	for i, c := range wantSchema {
		if ref.Table.Columns[i].ColumnSpec != c {
			t.Fatalf("column %d: %+v", i, ref.Table.Columns[i].ColumnSpec)
		}
	}
	formats := []densewire.TableFormat{densewire.TableMsgpack, densewire.TableArrow, densewire.TableCSV,
		densewire.TableJSONColumns, densewire.TableJSONRows, densewire.TableJSON}
	for _, f := range formats {
		res, err := client.GetTable(ctx, "points", &densewire.GetTableOptions{Formats: []densewire.TableFormat{f}})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if res.Format != f {
			t.Fatalf("asked for %s, got %s", f, res.Format)
		}
		sameTable(t, f.String(), res.Table, ref.Table)
		t.Logf("%-12s %9d bytes on the wire, Content-Encoding %q, ETag %s", f, res.WireBytes, res.ContentEncoding, res.ETag)
	}
	t.Logf("%-12s %9d bytes on the wire, Content-Encoding %q, ETag %s", ref.Format, ref.WireBytes, ref.ContentEncoding, ref.ETag)
	// the float32 variant of the demo table decodes too, by the server's own types
	f32, err := client.GetTable(ctx, "points_f32", nil)
	if err != nil {
		t.Fatalf("points_f32: %v", err)
	}
	if lon, err := f32.Table.Column("longitude").Float32(); err != nil || len(lon) != 67627 {
		t.Fatalf("points_f32 longitude: %v", err)
	}
	again, err := client.GetTable(ctx, "points", &densewire.GetTableOptions{IfNoneMatch: ref.ETag})
	if err != nil {
		t.Fatal(err)
	}
	if !again.NotModified {
		t.Fatalf("If-None-Match %s did not give 304", ref.ETag)
	}
	_, err = client.GetTable(ctx, "no-such-table", nil)
	if !errors.Is(err, densewire.NotFound) {
		t.Fatalf("unknown table: %v", err)
	}
}
