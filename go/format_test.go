package densewire_test

import (
	"net/http/httptest"
	"testing"

	densewire "github.com/densewire/densewire/go"
)

func TestNegotiate(t *testing.T) {
	four := []densewire.Format{densewire.FormatJSON, densewire.FormatRaw, densewire.FormatMsgpack, densewire.FormatProtobuf}
	tests := []struct {
		accept string
		want   densewire.Format
		media  string
	}{
		{"", densewire.FormatJSON, "application/json"},
		{"*/*", densewire.FormatJSON, "application/json"},
		{"application/*", densewire.FormatJSON, "application/json"},
		{"application/octet-stream", densewire.FormatRaw, "application/octet-stream"},
		{"application/x-msgpack", densewire.FormatMsgpack, "application/x-msgpack"},
		{"application/msgpack", densewire.FormatMsgpack, "application/msgpack"},
		{"application/x-protobuf", densewire.FormatProtobuf, "application/x-protobuf"},
		{"APPLICATION/VND.MSGPACK", densewire.FormatMsgpack, "application/vnd.msgpack"},
		{"application/json; charset=utf-8", densewire.FormatJSON, "application/json"},
		{"application/json;q=0.5, application/vnd.msgpack", densewire.FormatMsgpack, "application/vnd.msgpack"},
		{"application/*;q=0.9, application/json;q=0.1", densewire.FormatRaw, "application/octet-stream"},
		{"application/protobuf;q=0.8, application/octet-stream;q=0.8", densewire.FormatRaw, "application/octet-stream"},
		{"application/vnd.msgpack;q=0, */*;q=0.5", densewire.FormatJSON, "application/json"},
		{"application/json;q=0, application/vnd.msgpack;q=0, */*", densewire.FormatRaw, "application/octet-stream"},
		{"application/json;q=2, application/protobuf", densewire.FormatProtobuf, "application/protobuf"},
		{"text/html, application/protobuf;q=0.001", densewire.FormatProtobuf, "application/protobuf"},
		{"text/html", 0, ""},
		{"application/json;q=0", 0, ""},
		{"application/vnd.apache.arrow.stream", 0, ""}, // not offered
		{"garbage, ,;;", 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.accept, func(t *testing.T) {
			f, media, ok := densewire.Negotiate(tt.accept, four)
			if ok != (tt.want != 0) || f != tt.want || media != tt.media {
				t.Fatalf("got %s %q %v, want %s %q", f, media, ok, tt.want, tt.media)
			}
		})
	}
}

func TestNegotiateRequest(t *testing.T) {
	all := []densewire.Format{densewire.FormatJSON, densewire.FormatRaw, densewire.FormatMsgpack}
	r := httptest.NewRequest("POST", "/v1/embeddings?format=msgpack", nil)
	r.Header.Set("Accept", "application/json")
	if f, _, err := densewire.NegotiateRequest(r, all); err != nil || f != densewire.FormatMsgpack {
		t.Fatalf("format parameter: %s %v", f, err)
	}
	r = httptest.NewRequest("POST", "/?format=yaml", nil)
	if _, _, err := densewire.NegotiateRequest(r, all); err == nil {
		t.Fatal("unknown format accepted")
	} else {
		checkErr(t, err, densewire.NotAcceptable, "format")
	}
	r = httptest.NewRequest("POST", "/?format=protobuf", nil)
	if _, _, err := densewire.NegotiateRequest(r, all); err == nil {
		t.Fatal("format not offered accepted")
	} else {
		checkErr(t, err, densewire.NotAcceptable, "format")
	}
	r = httptest.NewRequest("POST", "/", nil)
	r.Header.Add("Accept", "text/html")
	r.Header.Add("Accept", "application/vnd.msgpack")
	if f, _, err := densewire.NegotiateRequest(r, all); err != nil || f != densewire.FormatMsgpack {
		t.Fatalf("several Accept headers: %s %v", f, err)
	}
	r = httptest.NewRequest("POST", "/", nil)
	r.Header.Set("Accept", "text/html")
	_, _, err := densewire.NegotiateRequest(r, all)
	checkErr(t, err, densewire.NotAcceptable, "Accept")
}

func TestFormatNames(t *testing.T) {
	for _, f := range densewire.AllFormats {
		back, err := densewire.ParseFormat(f.String())
		if err != nil || back != f {
			t.Errorf("%s: %v", f, err)
		}
		if g, ok := densewire.FormatOf(f.MediaType() + "; charset=binary"); !ok || g != f {
			t.Errorf("FormatOf(%s)", f.MediaType())
		}
	}
	if _, ok := densewire.FormatOf("text/plain"); ok {
		t.Error("text/plain")
	}
}
