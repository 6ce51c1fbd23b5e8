package densewire_test

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	densewire "github.com/densewire/densewire/go"
)

func TestErrorsIsAndAs(t *testing.T) {
	_, err := densewire.DecodeBase64("AACA*wAAAEA=", densewire.Float32, 1, 2, densewire.LittleEndian)
	wrapped := fmt.Errorf("loading vectors: %w", err)
	if !errors.Is(wrapped, densewire.InvalidBase64) {
		t.Fatal("errors.Is with the category")
	}
	if errors.Is(wrapped, densewire.Truncated) {
		t.Fatal("errors.Is matched another category")
	}
	var e *densewire.Error
	if !errors.As(wrapped, &e) || e.Offset != 4 || e.Category != densewire.InvalidBase64 {
		t.Fatalf("errors.As: %+v", e)
	}
	if got := err.Error(); got != "densewire: invalid Base64 character '*' at offset 4" {
		t.Fatalf("message %q", got)
	}
}

func TestErrorMessages(t *testing.T) {
	tests := []struct {
		err  *densewire.Error
		want string
	}{
		{&densewire.Error{Category: densewire.InvalidBase64, Field: "data[1].embedding", Offset: 4, Message: "invalid Base64 character '*' at offset 4"},
			"densewire: data[1].embedding: invalid Base64 character '*' at offset 4"},
		{&densewire.Error{Category: densewire.Malformed, Offset: -1}, "densewire: malformed"},
		{&densewire.Error{Category: densewire.NotFound, Status: 404, Offset: -1, Message: "no model x"},
			"densewire: server answered 404 not_found: no model x"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("got %q, want %q", got, tt.want)
		}
	}
}

func TestCategoryStatus(t *testing.T) {
	want := map[densewire.Category]int{
		densewire.InvalidBase64: 400, densewire.LengthMismatch: 400, densewire.ShapeMismatch: 400,
		densewire.UnknownDType: 400, densewire.Truncated: 400, densewire.Malformed: 400,
		densewire.InvalidField: 422, densewire.NonFinite: 422, densewire.Unauthorized: 401,
		densewire.NotFound: 404, densewire.PayloadTooLarge: 413, densewire.UnsupportedMediaType: 415,
		densewire.NotAcceptable: 406, densewire.Unavailable: 503, "something_else": 500,
	}
	for c, status := range want {
		if got := c.HTTPStatus(); got != status {
			t.Errorf("%s: %d, want %d", c, got, status)
		}
	}
	e := &densewire.Error{Category: densewire.Malformed, Status: http.StatusBadGateway}
	if e.HTTPStatus() != 502 {
		t.Error("Status overrides the category's")
	}
}
