package densewire

import (
	"net/http"
	"strconv"
	"strings"
)

// Format is one of the five body formats of SPEC.md section 12.
type Format uint8

// The formats, in the server's order of preference at equal quality (JSON first).
const (
	FormatJSON     Format = 1 // application/json, section 6
	FormatRaw      Format = 2 // application/octet-stream, section 7
	FormatMsgpack  Format = 3 // application/vnd.msgpack, section 8
	FormatProtobuf Format = 4 // application/protobuf, section 9
	FormatArrow    Format = 5 // application/vnd.apache.arrow.stream, section 10 (import densewire/go/arrowipc)
)

// Media types of SPEC.md section 12.
const (
	MediaJSON     = "application/json"
	MediaRaw      = "application/octet-stream"
	MediaMsgpack  = "application/vnd.msgpack"
	MediaProtobuf = "application/protobuf"
	MediaArrow    = "application/vnd.apache.arrow.stream"
)

var formatNames = [...]string{"", "json", "raw", "msgpack", "protobuf", "arrow"}

// mediaTypes lists each format's media types: the canonical one first, then its aliases.
var mediaTypes = [...][]string{
	nil,
	{MediaJSON},
	{MediaRaw},
	{MediaMsgpack, "application/msgpack", "application/x-msgpack"},
	{MediaProtobuf, "application/x-protobuf"},
	{MediaArrow},
}

// AllFormats is every format in the server's order.
var AllFormats = []Format{FormatJSON, FormatRaw, FormatMsgpack, FormatProtobuf, FormatArrow}

// String returns the name used by the format query parameter: json, raw, msgpack, protobuf, arrow.
func (f Format) String() string {
	if f >= FormatJSON && f <= FormatArrow {
		return formatNames[f]
	}
	return "Format(" + strconv.Itoa(int(f)) + ")"
}

// MediaType returns the canonical media type of the format.
func (f Format) MediaType() string {
	if f >= FormatJSON && f <= FormatArrow {
		return mediaTypes[f][0]
	}
	return ""
}

// ParseFormat parses a format query parameter value (json, raw, msgpack, protobuf, arrow).
func ParseFormat(name string) (Format, error) {
	for f := FormatJSON; f <= FormatArrow; f++ {
		if formatNames[f] == name {
			return f, nil
		}
	}
	return 0, newError(InvalidField, "format", -1, "unknown format "+strconv.Quote(name)+" (want json, raw, msgpack, protobuf or arrow)")
}

// FormatOf returns the format of a Content-Type value (parameters ignored, aliases accepted).
func FormatOf(contentType string) (Format, bool) {
	mt := mediaTypeOnly(contentType)
	for f := FormatJSON; f <= FormatArrow; f++ {
		for _, m := range mediaTypes[f] {
			if mt == m {
				return f, true
			}
		}
	}
	return 0, false
}

func mediaTypeOnly(v string) string {
	if i := strings.IndexByte(v, ';'); i >= 0 {
		v = v[:i]
	}
	return strings.ToLower(strings.TrimSpace(v))
}

type mediaRange struct {
	typ, sub string
	q        float64
}

// parseAccept parses an Accept header value; ranges with an invalid q-value are dropped.
func parseAccept(accept string) []mediaRange {
	var out []mediaRange
	for _, part := range strings.Split(accept, ",") {
		params := strings.Split(part, ";")
		mt := strings.ToLower(strings.TrimSpace(params[0]))
		typ, sub, ok := strings.Cut(mt, "/")
		if !ok || typ == "" || sub == "" || (typ == "*" && sub != "*") {
			continue
		}
		if q, valid := qValue(params[1:]); valid {
			out = append(out, mediaRange{typ: typ, sub: sub, q: q})
		}
	}
	return out
}

// qValue is the q parameter among an Accept or Accept-Encoding element's parameters (1 when it has
// none), and whether it is valid: a number from 0 to 1.
func qValue(params []string) (float64, bool) {
	q, valid := 1.0, true
	for _, p := range params {
		k, v, _ := strings.Cut(p, "=")
		if strings.EqualFold(strings.TrimSpace(k), "q") {
			x, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			q, valid = x, valid && err == nil && x >= 0 && x <= 1
		}
	}
	return q, valid
}

// quality is the q-value the ranges give media type mt: that of the most specific matching range
// (type/subtype over type/* over */*), and that specificity (2, 1, 0; -1 when nothing matches).
func quality(ranges []mediaRange, mt string) (float64, int) {
	typ, sub, _ := strings.Cut(mt, "/")
	best, spec := -1.0, -1
	for _, r := range ranges {
		s := -1
		switch {
		case r.typ == typ && r.sub == sub:
			s = 2
		case r.typ == typ && r.sub == "*":
			s = 1
		case r.typ == "*" && r.sub == "*":
			s = 0
		}
		if s > spec || s == spec && s >= 0 && r.q > best {
			best, spec = r.q, s
		}
	}
	return best, spec
}

// Negotiate picks the response format for an Accept header value among the offered formats (in
// the server's order of preference), by RFC 9110 section 12.5.1 as SPEC.md section 12 says: the
// highest q-value wins, more specific ranges override less specific ones, q=0 excludes, ties go to
// the earlier offered format; an empty Accept means the first offered format. It returns the
// format and the media type to answer with (the alias the client named, if it named one), or
// ok false when nothing offered is acceptable.
func Negotiate(accept string, offered []Format) (f Format, mediaType string, ok bool) {
	if len(offered) == 0 {
		return 0, "", false
	}
	if strings.TrimSpace(accept) == "" {
		return offered[0], offered[0].MediaType(), true
	}
	ranges := parseAccept(accept)
	bestQ := 0.0
	for _, o := range offered {
		if o < FormatJSON || o > FormatArrow {
			continue
		}
		// A format's quality comes from the most specific range naming any of its media types, so
		// that "application/vnd.msgpack;q=0, */*" excludes MessagePack under its aliases too.
		qo, so, mto := -1.0, -1, o.MediaType()
		for _, mt := range mediaTypes[o] {
			q, s := quality(ranges, mt)
			if s > so || s == so && q > qo {
				qo, so = q, s
				if s == 2 {
					mto = mt // answer with the name the client used
				}
			}
		}
		if qo > bestQ {
			f, mediaType, bestQ, ok = o, mto, qo, true
		}
	}
	return f, mediaType, ok
}

// supportedList is the message of a 406 answer.
func supportedList(offered []Format) string {
	var b strings.Builder
	for i, f := range offered {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strings.Join(mediaTypes[f], ", "))
	}
	return b.String()
}

// NegotiateRequest picks the response format of an HTTP request: the format query parameter if
// present (a NotAcceptable error on "format" if it names no format or one not offered, SPEC.md
// section 12), else the
// Accept header (a NotAcceptable error listing the supported types when nothing fits).
func NegotiateRequest(r *http.Request, offered []Format) (Format, string, error) {
	if name := r.URL.Query().Get("format"); name != "" {
		f, err := ParseFormat(name)
		if err != nil {
			return 0, "", newError(NotAcceptable, "format", -1, "format "+strconv.Quote(name)+" is not supported (supported: "+supportedList(offered)+")")
		}
		for _, o := range offered {
			if o == f {
				return f, f.MediaType(), nil
			}
		}
		return 0, "", newError(NotAcceptable, "format", -1, "format "+name+" is not available here (supported: "+supportedList(offered)+")")
	}
	accept := strings.Join(r.Header.Values("Accept"), ",")
	f, mt, ok := Negotiate(accept, offered)
	if !ok {
		return 0, "", newError(NotAcceptable, "Accept", -1, "nothing in Accept can be served; supported: "+supportedList(offered))
	}
	return f, mt, nil
}
