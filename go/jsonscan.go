package densewire

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// A small JSON (RFC 8259) scanner for the embeddings envelope. It validates the whole text in one
// pass and records where the values densewire needs are, so that the rows are decoded straight into
// the tensor once the dtype (which comes after data) is known; every syntax error is Malformed at
// its byte offset. NaN, Infinity and -Infinity are not JSON and are rejected like any bad token.

const maxJSONDepth = 1000

type span struct{ start, end int } // [start, end) of a value in the text; start < 0: absent

var noSpan = span{-1, -1}

func (s span) ok() bool { return s.start >= 0 }

type jsonScanner struct {
	b []byte
	i int
}

func (p *jsonScanner) syntax(msg string) *Error {
	return newError(Malformed, "", p.i, "invalid JSON at offset "+strconv.Itoa(p.i)+": "+msg)
}

func (p *jsonScanner) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte, or 0 at the end.
func (p *jsonScanner) peek() byte {
	p.ws()
	if p.i < len(p.b) {
		return p.b[p.i]
	}
	return 0
}

// atEnd reports whether only white space is left (peek's 0 is also a NUL byte in the text).
func (p *jsonScanner) atEnd() bool {
	p.ws()
	return p.i >= len(p.b)
}

func (p *jsonScanner) expect(c byte) *Error {
	if p.peek() != c {
		if p.i >= len(p.b) {
			return p.syntax("unexpected end, want " + strconv.QuoteRune(rune(c)))
		}
		return p.syntax("want " + strconv.QuoteRune(rune(c)) + ", got " + quoteChar(stringView(p.b), p.i))
	}
	p.i++
	return nil
}

// value skips one value, validating it, and returns its span.
func (p *jsonScanner) value(depth int) (span, *Error) {
	if depth > maxJSONDepth {
		return noSpan, p.syntax("nesting deeper than " + strconv.Itoa(maxJSONDepth))
	}
	c := p.peek()
	start := p.i
	var err *Error
	switch {
	case c == '{':
		err = p.object(depth, func(string, int) *Error { _, e := p.value(depth + 1); return e })
	case c == '[':
		_, err = p.array(depth, func(int) *Error { _, e := p.value(depth + 1); return e })
	case c == '"':
		_, _, err = p.str()
	case c == '-' || c >= '0' && c <= '9':
		err = p.number()
	case c == 't':
		err = p.literal("true")
	case c == 'f':
		err = p.literal("false")
	case c == 'n':
		err = p.literal("null")
	case p.i >= len(p.b):
		err = p.syntax("unexpected end of input")
	default:
		err = p.syntax("unexpected character " + quoteChar(stringView(p.b), p.i))
	}
	return span{start, p.i}, err
}

func (p *jsonScanner) literal(word string) *Error {
	if len(p.b)-p.i < len(word) || string(p.b[p.i:p.i+len(word)]) != word {
		return p.syntax("invalid literal")
	}
	p.i += len(word)
	return nil
}

// object walks an object, calling member with each key (unescaped) after the colon.
func (p *jsonScanner) object(depth int, member func(key string, depth int) *Error) *Error {
	if err := p.expect('{'); err != nil {
		return err
	}
	if p.peek() == '}' {
		p.i++
		return nil
	}
	for {
		if p.peek() != '"' {
			return p.syntax("want an object key")
		}
		s, esc, err := p.str()
		if err != nil {
			return err
		}
		key := string(p.b[s.start+1 : s.end-1])
		if esc {
			key, _ = unquoteJSON(p.b[s.start:s.end])
		}
		if err := p.expect(':'); err != nil {
			return err
		}
		if err := member(key, depth+1); err != nil {
			return err
		}
		switch p.peek() {
		case ',':
			p.i++
		case '}':
			p.i++
			return nil
		default:
			return p.syntax("want ',' or '}'")
		}
	}
}

// array walks an array, calling elem for each element, and returns the element count.
func (p *jsonScanner) array(depth int, elem func(j int) *Error) (int, *Error) {
	if err := p.expect('['); err != nil {
		return 0, err
	}
	if p.peek() == ']' {
		p.i++
		return 0, nil
	}
	for j := 0; ; j++ {
		if err := elem(j); err != nil {
			return 0, err
		}
		switch p.peek() {
		case ',':
			p.i++
		case ']':
			p.i++
			return j + 1, nil
		default:
			return 0, p.syntax("want ',' or ']'")
		}
	}
}

// str scans a string and returns its span (quotes included) and whether it has escapes. Strings
// without escapes or control characters (all Base64 rows) take a fast path: a SIMD search for the
// closing quote, then word-at-a-time checks of the bytes before it.
func (p *jsonScanner) str() (span, bool, *Error) {
	start := p.i
	if q := bytes.IndexByte(p.b[start+1:], '"'); q >= 0 {
		seg := p.b[start+1 : start+1+q]
		if bytes.IndexByte(seg, '\\') < 0 && !hasControl(seg) && utf8.Valid(seg) {
			p.i = start + q + 2
			return span{start, p.i}, false, nil
		}
	}
	p.i++ // the opening quote
	esc := false
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return span{start, p.i}, esc, nil
		case c == '\\':
			esc = true
			if p.i+1 >= len(p.b) {
				p.i = len(p.b)
				return noSpan, false, p.syntax("unexpected end in string escape")
			}
			switch p.b[p.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				p.i += 2
			case 'u':
				if len(p.b)-p.i < 6 || !isHex4(p.b[p.i+2:p.i+6]) {
					return noSpan, false, p.syntax("invalid \\u escape")
				}
				p.i += 6
			default:
				return noSpan, false, p.syntax("invalid escape")
			}
		case c < 0x20:
			return noSpan, false, p.syntax("control character in string")
		case c >= utf8.RuneSelf: // JSON text is UTF-8 (RFC 8259); a key or value that is not is malformed
			r, size := utf8.DecodeRune(p.b[p.i:])
			if r == utf8.RuneError && size <= 1 {
				return noSpan, false, p.syntax("string is not valid UTF-8")
			}
			p.i += size
		default:
			p.i++
		}
	}
	return noSpan, false, p.syntax("unexpected end in string")
}

// hasControl reports whether b has a byte below 0x20, eight bytes at a time.
func hasControl(b []byte) bool {
	const ones, highs, spaces = 0x0101010101010101, 0x8080808080808080, 0x2020202020202020
	i := 0
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		// a byte below 0x20 borrows when 0x20 is subtracted and had its top bit clear
		if (x-spaces)&^x&highs != 0 {
			for _, c := range b[i : i+8] {
				if c < 0x20 {
					return true
				}
			}
		}
	}
	for _, c := range b[i:] {
		if c < 0x20 {
			return true
		}
	}
	return false
}

func isHex4(b []byte) bool {
	for _, c := range b[:4] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// number scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (p *jsonScanner) number() *Error {
	b, i := p.b, p.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		p.i = i
		return p.syntax("invalid number")
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			p.i = i
			return p.syntax("invalid number")
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			p.i = i
			return p.syntax("invalid number")
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	p.i = i
	return nil
}

// unquoteJSON decodes a JSON string literal (quotes included) that str has validated.
func unquoteJSON(q []byte) (string, bool) {
	if len(q) < 2 || q[0] != '"' || q[len(q)-1] != '"' {
		return "", false
	}
	q = q[1 : len(q)-1]
	out := make([]byte, 0, len(q))
	for i := 0; i < len(q); {
		c := q[i]
		if c != '\\' {
			out = append(out, c)
			i++
			continue
		}
		if i+1 >= len(q) {
			return "", false
		}
		switch q[i+1] {
		case '"', '\\', '/':
			out = append(out, q[i+1])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			if i+6 > len(q) {
				return "", false
			}
			r := hex4(q[i+2 : i+6])
			i += 6
			if utf16.IsSurrogate(r) {
				if i+6 <= len(q) && q[i] == '\\' && q[i+1] == 'u' && isHex4(q[i+2:i+6]) {
					if r2 := utf16.DecodeRune(r, hex4(q[i+2:i+6])); r2 != utf8.RuneError {
						out = utf8.AppendRune(out, r2)
						i += 6
						continue
					}
				}
				r = utf8.RuneError
			}
			out = utf8.AppendRune(out, r)
			continue
		default:
			return "", false
		}
		i += 2
	}
	return string(out), true
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		default:
			r |= rune(c - 'A' + 10)
		}
	}
	return r
}

// appendJSONString appends s as a JSON string literal.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c < 0x20:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, `\ufffd`...)
		} else {
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}
