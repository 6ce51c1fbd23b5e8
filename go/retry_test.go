package densewire_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	densewire "github.com/densewire/densewire/go"
)

// faultServer injects one fault per request, in order, then hands the requests to next ("ok"
// hands one over in between): "429"
// and "503" (with retryAfter as Retry-After when set), "400", or "close" (the connection is
// closed after the request was read, before any byte of an answer).
type faultServer struct {
	faults     []string
	retryAfter string
	next       http.Handler
	count      atomic.Int32
	mu         sync.Mutex
	at         []time.Time // when each request arrived
}

func (s *faultServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := int(s.count.Add(1))
	s.mu.Lock()
	s.at = append(s.at, time.Now())
	s.mu.Unlock()
	if n > len(s.faults) || s.faults[n-1] == "ok" {
		s.next.ServeHTTP(w, r)
		return
	}
	switch fault := s.faults[n-1]; fault {
	case "close":
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	case "429", "503", "400":
		if s.retryAfter != "" {
			w.Header().Set("Retry-After", s.retryAfter)
		}
		w.Header().Set("Content-Type", "application/json")
		code := map[string]string{"429": "rate_limited", "503": "unavailable", "400": "malformed"}[fault]
		w.WriteHeader(map[string]int{"429": 429, "503": 503, "400": 400}[fault])
		fmt.Fprintf(w, `{"error":{"message":"injected %s","type":"invalid_request_error","param":null,"code":%q}}`, fault, code)
	}
}

// fastRetry retries quickly, so that the tests do not wait; no keep-alive, so that every attempt
// is a connection of its own and net/http's own retry of a stale idle connection never counts.
func fastRetry(url string, retries int) *densewire.Client {
	return &densewire.Client{
		BaseURL:    url,
		HTTPClient: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}},
		Retry:      &densewire.RetryPolicy{MaxRetries: retries, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond},
	}
}

func TestRetryEmbedRecovers(t *testing.T) {
	for _, faults := range [][]string{{"429", "429"}, {"503"}, {"close", "close"}, {"429", "close", "503"}} {
		t.Run(strings.Join(faults, "+"), func(t *testing.T) {
			fs := &faultServer{faults: faults, retryAfter: "0", next: &fakeServer{}}
			srv := httptest.NewServer(fs)
			defer srv.Close()
			input := inputs(5)
			tensor, _, err := fastRetry(srv.URL, 3).Embed(context.Background(), &densewire.EmbeddingsRequest{Input: input})
			if err != nil {
				t.Fatal(err)
			}
			checkRows(t, tensor, input, 8)
			if got := int(fs.count.Load()); got != len(faults)+1 {
				t.Fatalf("%d attempts, want %d", got, len(faults)+1)
			}
		})
	}
}

func TestRetryGivesUpWithAttempts(t *testing.T) {
	for _, tt := range []struct {
		fault string
		is    error
	}{{"429", densewire.RateLimited}, {"503", densewire.Unavailable}, {"close", densewire.Unavailable}} {
		t.Run(tt.fault, func(t *testing.T) {
			fs := &faultServer{faults: []string{tt.fault, tt.fault, tt.fault, tt.fault}, next: &fakeServer{}}
			srv := httptest.NewServer(fs)
			defer srv.Close()
			_, _, err := fastRetry(srv.URL, 2).Embed(context.Background(), &densewire.EmbeddingsRequest{Input: inputs(2)})
			var e *densewire.Error
			if !errors.As(err, &e) || !errors.Is(err, tt.is) || e.Attempts != 3 || !strings.HasSuffix(err.Error(), "(3 attempts)") {
				t.Fatalf("got %v (%#v)", err, err)
			}
			if got := fs.count.Load(); got != 3 {
				t.Fatalf("%d requests, want 3", got)
			}
		})
	}
}

func TestRetryNeverRetriesCallerFault(t *testing.T) {
	fs := &faultServer{faults: []string{"400"}, next: &fakeServer{}}
	srv := httptest.NewServer(fs)
	defer srv.Close()
	_, _, err := fastRetry(srv.URL, 5).Embed(context.Background(), &densewire.EmbeddingsRequest{Input: inputs(2)})
	var e *densewire.Error
	if !errors.As(err, &e) || e.Status != 400 || e.Attempts != 1 || !errors.Is(err, densewire.Malformed) || !strings.HasSuffix(err.Error(), "(1 attempt)") {
		t.Fatalf("got %v", err)
	}
	// a 422 of the real handler (an empty input) is not retried either
	_, _, err = fastRetry(srv.URL, 5).Embed(context.Background(), &densewire.EmbeddingsRequest{Input: []string{"a", ""}})
	if !errors.Is(err, densewire.InvalidField) || fs.count.Load() != 2 {
		t.Fatalf("got %v after %d requests", err, fs.count.Load())
	}
}

func TestRetryDisabled(t *testing.T) {
	fs := &faultServer{faults: []string{"429"}, next: &fakeServer{}}
	srv := httptest.NewServer(fs)
	defer srv.Close()
	c := fastRetry(srv.URL, 0)
	if _, _, err := c.Embed(context.Background(), &densewire.EmbeddingsRequest{Input: inputs(2)}); !errors.Is(err, densewire.RateLimited) || fs.count.Load() != 1 {
		t.Fatalf("got %v after %d requests", err, fs.count.Load())
	}
}

// The wait honours Retry-After: the retry does not come before the second the server asked for.
func TestRetryHonoursRetryAfter(t *testing.T) {
	fs := &faultServer{faults: []string{"503"}, retryAfter: "1", next: &fakeServer{}}
	srv := httptest.NewServer(fs)
	defer srv.Close()
	if _, _, err := fastRetry(srv.URL, 1).Embed(context.Background(), &densewire.EmbeddingsRequest{Input: inputs(2)}); err != nil {
		t.Fatal(err)
	}
	if gap := fs.at[1].Sub(fs.at[0]); gap < time.Second {
		t.Fatalf("retried %v after a Retry-After of 1 s", gap)
	}
}

// A cancelled context ends the backoff at once with ctx.Err(), however long the server asked to wait.
func TestRetryCancelledDuringBackoff(t *testing.T) {
	fs := &faultServer{faults: []string{"429"}, retryAfter: "30", next: &fakeServer{}} // under a minute: waited for
	srv := httptest.NewServer(fs)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, _, err := fastRetry(srv.URL, 2).Embed(ctx, &densewire.EmbeddingsRequest{Input: inputs(2)})
		done <- err
	}()
	for fs.count.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) || fs.count.Load() != 1 {
		t.Fatalf("got %v after %d requests", err, fs.count.Load())
	}
}

func TestRetryTables(t *testing.T) {
	ts := newTableServer(t, "all_types")
	fs := &faultServer{faults: []string{"503", "429", "ok", "close", "503", "ok", "400"}, retryAfter: "0", next: ts}
	srv := httptest.NewServer(fs)
	defer srv.Close()
	c := fastRetry(srv.URL, 2)
	list, err := c.ListTables(context.Background()) // 503, 429, then served
	if err != nil || len(list) != 1 || fs.count.Load() != 3 {
		t.Fatalf("ListTables: %v, %d requests", err, fs.count.Load())
	}
	res, err := c.GetTable(context.Background(), list[0].Name, nil) // close, 503, then served
	if err != nil || res.Table == nil || fs.count.Load() != 6 {
		t.Fatalf("GetTable: %v, %d requests", err, fs.count.Load())
	}
	if _, err := c.GetTable(context.Background(), list[0].Name, nil); !errors.Is(err, densewire.Malformed) || fs.count.Load() != 7 {
		t.Fatalf("400: %v, %d requests", err, fs.count.Load())
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		value string
		want  time.Duration
		ok    bool
	}{
		{"2", 2 * time.Second, true},
		{" 0 ", 0, true},
		{"007", 7 * time.Second, true},
		{"86400", 24 * time.Hour, true}, // not capped: a Client gives up on more than MaxRetryAfter
		{"Wed, 25 Nov 2026 12:00:10 GMT", 10 * time.Second, true},
		{"Wed, 25 Nov 2026 11:59:00 GMT", 0, true}, // a date in the past: now
		{"", 0, false},
		{"-1", 0, false},
		{"1.5", 0, false}, // delay-seconds are digits only (SPEC.md 18.2)
		{"+3", 0, false},
		{"soon", 0, false},
	} {
		got, ok := densewire.ParseRetryAfter(tt.value, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tt.value, got, ok, tt.want, tt.ok)
		}
	}
}

func TestBackoffFullJitter(t *testing.T) {
	p := densewire.RetryPolicy{BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second}
	for n, bound := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 80: time.Second} {
		var top time.Duration
		for range 2000 {
			d := p.Backoff(n)
			if d < 0 || d >= bound {
				t.Fatalf("retry %d: %v outside [0, %v)", n, d, bound)
			}
			top = max(top, d)
		}
		if top < bound/2 { // 2000 uniform draws all in the lower half: not uniform over [0, bound)
			t.Fatalf("retry %d: the largest of 2000 waits is %v, bound %v", n, top, bound)
		}
	}
}

// The jitter is added on top of Retry-After, never max(jitter, Retry-After); over a minute gives up.
func TestRetryWaitJitterOnTopOfRetryAfter(t *testing.T) {
	p := densewire.DefaultRetryPolicy
	seen := map[float64]bool{}
	for range 200 {
		w, ok := p.Wait(1, 429, "3", time.Now())
		if !ok || w < 3 || w >= 3.5 {
			t.Fatalf("wait %v, %v: want [3, 3.5)", w, ok)
		}
		seen[w] = true
	}
	if len(seen) < 100 {
		t.Fatalf("%d distinct waits of 200: not spread", len(seen))
	}
	for _, tt := range []struct{ n, status int }{{1, 500}, {1, 502}, {1, 400}, {3, 0}, {3, 429}} {
		if _, ok := p.Wait(tt.n, tt.status, "", time.Now()); ok {
			t.Errorf("retry %d after status %d: want to give up", tt.n, tt.status)
		}
	}
	if _, ok := p.Wait(1, 503, "61", time.Now()); ok {
		t.Error("Retry-After 61: want to give up")
	}
	seeded := func() densewire.RetryPolicy {
		r := rand.New(rand.NewPCG(7, 7))
		return densewire.RetryPolicy{MaxRetries: 2, Rand: r.Float64}
	}
	a, _ := seeded().Wait(1, 0, "", time.Now())
	b, _ := seeded().Wait(1, 0, "", time.Now())
	if a != b {
		t.Fatalf("seeded Rand: %v != %v", a, b)
	}
}

// A Retry-After over a minute is not waited for: the *Error comes at once, carrying it.
func TestRetryGivesUpOnRetryAfterOverAMinute(t *testing.T) {
	fs := &faultServer{faults: []string{"429", "429"}, retryAfter: "61", next: &fakeServer{}}
	srv := httptest.NewServer(fs)
	defer srv.Close()
	_, _, err := (&densewire.Client{BaseURL: srv.URL}).Embed(context.Background(), &densewire.EmbeddingsRequest{Input: inputs(2)})
	var e *densewire.Error
	if !errors.As(err, &e) || !errors.Is(err, densewire.RateLimited) || e.Attempts != 1 || e.RetryAfter != 61*time.Second {
		t.Fatalf("got %v (%#v)", err, err)
	}
	if fs.count.Load() != 1 {
		t.Fatalf("%d requests, want 1", fs.count.Load())
	}
}

// Against a real overloaded server: scripts/test.sh starts `densewire serve
// --max-concurrent-requests 1` and sets DENSEWIRE_OVERLOAD_URL. 16 concurrent requests of 16 texts
// all succeed with 8 retries; without retries at least one is a 429.
func TestRetryLiveOverload(t *testing.T) {
	base := os.Getenv("DENSEWIRE_OVERLOAD_URL")
	if base == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("DENSEWIRE_OVERLOAD_URL is not set, and CI=true: scripts/test.sh must start the overloaded server")
		}
		t.Skip("DENSEWIRE_OVERLOAD_URL is not set (scripts/test.sh starts densewire serve --max-concurrent-requests 1 there)")
	}
	burst := func(retries int, tag string) []error {
		c := &densewire.Client{BaseURL: base, APIKey: os.Getenv("DENSEWIRE_API_KEY"), Retry: &densewire.RetryPolicy{MaxRetries: retries}}
		errs := make([]error, 16)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range errs {
			wg.Go(func() {
				input := make([]string, 16)
				for j := range input {
					input[j] = fmt.Sprintf("%s request %d text %d: %s", tag, i, j, "a sentence about retries")
				}
				<-start
				tensor, _, err := c.Embed(context.Background(), &densewire.EmbeddingsRequest{Input: input})
				if err == nil && tensor.N != 16 {
					err = fmt.Errorf("%d rows", tensor.N)
				}
				errs[i] = err
			})
		}
		close(start)
		wg.Wait()
		return errs
	}
	run := time.Now().UnixNano()
	for i, err := range burst(8, fmt.Sprint("retried ", run)) {
		if err != nil {
			t.Errorf("request %d with 8 retries: %v", i, err)
		}
	}
	limited := 0
	for i, err := range burst(0, fmt.Sprint("unretried ", run)) {
		if errors.Is(err, densewire.RateLimited) {
			limited++
		} else if err != nil {
			t.Errorf("request %d without retries: %v, want success or a 429", i, err)
		}
	}
	if limited == 0 {
		t.Fatal("16 concurrent requests without retries: none was rate limited (429)")
	}
	t.Logf("without retries: %d of 16 requests answered 429", limited)
}

// overloadURL is DENSEWIRE_OVERLOAD_URL; without it the test fails under CI and is skipped elsewhere.
func overloadURL(t *testing.T) string {
	base := os.Getenv("DENSEWIRE_OVERLOAD_URL")
	if base == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("DENSEWIRE_OVERLOAD_URL is not set, and CI=true: scripts/test.sh must start the overloaded server")
		}
		t.Skip("DENSEWIRE_OVERLOAD_URL is not set (scripts/test.sh starts densewire serve --max-concurrent-requests 1 there)")
	}
	return base
}

func rejectedFull(t *testing.T, base string) float64 {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if rest, ok := strings.CutPrefix(line, `densewire_admission_rejections_total{reason="full"} `); ok {
			v, err := strconv.ParseFloat(rest, 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	return 0
}

// Twelve clients, each a new Client with the default policy (2 retries), send one request of 16
// texts of the built-in model (about half a second on two busy cores) at once against
// --max-concurrent-requests 1: every one succeeds, because the server tells those it turns away to
// come back one after another (SPEC.md 18.3) and the clients add their jitter on top (18.2).
func TestRetryTwelveClientsOneSlotDefaultPolicy(t *testing.T) {
	base := overloadURL(t)
	run := time.Now().UnixNano()
	texts := func(tag string) []string {
		out := make([]string, 16)
		for j := range out {
			out[j] = fmt.Sprintf("%s %d text %d: a sentence of a dozen words about retrying an overloaded server", tag, run, j)
		}
		return out
	}
	client := func() *densewire.Client {
		return &densewire.Client{BaseURL: base, APIKey: os.Getenv("DENSEWIRE_API_KEY"), HTTPClient: &http.Client{Transport: &http.Transport{}}}
	}
	warm := client() // the model warm, and the server's estimate of such a request
	for k := range 3 {
		if _, _, err := warm.Embed(context.Background(), &densewire.EmbeddingsRequest{Input: texts(fmt.Sprint("warm ", k))}); err != nil {
			t.Fatal(err)
		}
	}
	before := rejectedFull(t, base)
	errs := make([]error, 12)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			c := client()
			<-start
			tensor, _, err := c.Embed(context.Background(), &densewire.EmbeddingsRequest{Input: texts(fmt.Sprint("client ", i))})
			if err == nil && (tensor.N != 16 || tensor.D != 384) {
				err = fmt.Errorf("%d x %d", tensor.N, tensor.D)
			}
			errs[i] = err
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("client %d: %v", i, err)
		}
	}
	if rejectedFull(t, base) <= before {
		t.Fatal("no request was turned away: the twelve did not overlap, nothing was tested")
	}
}
