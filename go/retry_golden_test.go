package densewire_test

import (
	"math"
	"strconv"
	"testing"
	"time"

	densewire "github.com/densewire/densewire/go"
)

// The golden cases of retry.json (SPEC.md section 18.4), run by TestGolden: the wait before a retry,
// or giving up, through RetryPolicy.Wait (the rule the Client's retry loop calls) with the case's
// draw injected as the policy's Rand; waits compared bit for bit.

func f64bits(t testing.TB, h string) float64 {
	t.Helper()
	v, err := strconv.ParseUint(h, 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	return math.Float64frombits(v)
}

// exactDuration is seconds as a Duration, failing unless it is a whole number of nanoseconds.
func exactDuration(t testing.TB, seconds float64) time.Duration {
	t.Helper()
	d := time.Duration(math.Round(seconds * 1e9))
	if d.Seconds() != seconds {
		t.Fatalf("%v s is no whole number of nanoseconds", seconds)
	}
	return d
}

func checkRetry(t *testing.T, c *goldenCase) {
	draw := f64bits(t, c.DrawBits)
	if strconv.FormatFloat(draw, 'f', -1, 64) != c.Draw && strconv.FormatFloat(draw, 'f', 1, 64) != c.Draw {
		t.Fatalf("draw %v, the case says %s", draw, c.Draw)
	}
	p := densewire.RetryPolicy{
		MaxRetries: c.MaxRetries,
		BaseDelay:  exactDuration(t, f64bits(t, c.BaseBits)),
		MaxDelay:   exactDuration(t, f64bits(t, c.CapBits)),
		Rand:       func() float64 { return draw },
	}
	if p.BaseDelay == 0 { // RetryPolicy reads a zero BaseDelay as the default, a negative one as none
		p.BaseDelay = -1
	}
	sec, frac := math.Modf(c.Now)
	now := time.Unix(int64(sec), int64(frac*1e9))
	retryAfter := ""
	if c.RetryAfter != nil {
		retryAfter = *c.RetryAfter
	}
	wait, ok := p.Wait(c.Retry, c.Status, retryAfter, now)
	if c.GiveUp == "" {
		if !ok {
			t.Fatalf("gave up, the spec waits %s s", c.Wait)
		}
		if got := strconv.FormatUint(math.Float64bits(wait), 16); leftPad16(got) != c.WaitBits {
			t.Fatalf("waits %v (%s), the spec %s (%s)", wait, leftPad16(got), c.Wait, c.WaitBits)
		}
		return
	}
	if ok {
		t.Fatalf("waits %v s, the spec gives up (%s)", wait, c.GiveUp)
	}
	if c.GiveUp == "retry_after_too_long" { // what the 429/503 *Error carries
		d, ok := densewire.ParseRetryAfter(retryAfter, now)
		want, err := strconv.ParseFloat(c.RetryAfterSeconds, 64)
		if !ok || err != nil || d <= densewire.MaxRetryAfter || (want < 9e9 && d.Seconds() != want) {
			t.Fatalf("Retry-After %q read as %v, %v; the spec %s s", retryAfter, d, ok, c.RetryAfterSeconds)
		}
	}
}

func leftPad16(h string) string {
	for len(h) < 16 {
		h = "0" + h
	}
	return h
}
