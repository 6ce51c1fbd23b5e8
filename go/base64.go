package densewire

import (
	"strconv"

	simd "github.com/segmentio/asm/base64"
)

// Base64 (SPEC.md section 5). The bulk work is done by github.com/segmentio/asm/base64 (AVX2 on
// amd64, NEON on arm64, the standard library elsewhere; bench/go/RESULTS.md has the measurement).
// Its decoder, like encoding/base64's, skips '\r' and '\n' and ignores the trailing bits, so the
// strict checks of the spec are made here: the decoded length is predicted from the string before
// decoding, and any input that fails or decodes to another length is run through checkBase64, which
// finds the first offending character as the spec defines it.

var (
	b64Padded   = simd.StdEncoding
	b64Unpadded = simd.RawStdEncoding
)

const b64Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

var b64Valid = func() (t [256]bool) {
	for i := 0; i < len(b64Alphabet); i++ {
		t[b64Alphabet[i]] = true
	}
	return t
}()

// EncodeBase64 returns the padded standard Base64 (RFC 4648 section 4) of the tensor's bytes laid
// out in the given byte order.
func EncodeBase64(t *Tensor, order ByteOrder) string {
	buf := AppendBase64(make([]byte, 0, b64Padded.EncodedLen(len(t.Data))), t, order)
	return stringView(buf)
}

// AppendBase64 appends the Base64 of the tensor's bytes in the given byte order to dst.
func AppendBase64(dst []byte, t *Tensor, order ByteOrder) []byte {
	return appendBase64(dst, t.Data, t.DType.ItemSize(), order)
}

// appendBase64 encodes little-endian data of width-byte items in the given order.
func appendBase64(dst, data []byte, width int, order ByteOrder) []byte {
	n := b64Padded.EncodedLen(len(data))
	start := len(dst)
	if cap(dst)-start < n {
		grown := make([]byte, start, start+n)
		copy(grown, dst)
		dst = grown
	}
	dst = dst[:start+n]
	out := dst[start:]
	if order == LittleEndian || width == 1 {
		b64Padded.Encode(out, data)
		return dst
	}
	// Big-endian: swap into a small buffer, a multiple of 3 and 8 bytes, and encode chunk by chunk.
	var chunk [3 * 1024 * 8]byte
	for len(data) > 0 {
		k := min(len(data), len(chunk))
		swappedCopy(chunk[:k], data[:k], width)
		b64Padded.Encode(out, chunk[:k])
		out = out[b64Padded.EncodedLen(k):]
		data = data[k:]
	}
	return dst
}

// DecodeBase64 decodes a tensor of n rows of d dimensions of dtype carried as one Base64 string in
// the given byte order. Decoding is strict (SPEC.md section 5): a character outside the standard
// alphabet, misplaced or excess padding, or a dangling character is an InvalidBase64 error at its
// character offset; unpadded input and non-zero trailing bits are accepted. A decoded length other
// than n*RowBytes(d) is a LengthMismatch error at the first missing or excess byte. The tensor's
// Data is newly allocated and aligned, so Tensor.ViewFloat32 succeeds on a little-endian host.
func DecodeBase64(s string, dtype DType, n, d int, order ByteOrder) (*Tensor, error) {
	if !dtype.Valid() {
		return nil, newError(UnknownDType, "dtype", -1, "invalid dtype "+dtype.String())
	}
	if order > BigEndian {
		return nil, newError(InvalidField, "byteorder", -1, "invalid byte order "+order.String())
	}
	if n < 0 || d < 0 || d > maxDim {
		return nil, newError(InvalidField, "shape", -1, "invalid shape ("+strconv.Itoa(n)+", "+strconv.Itoa(d)+")")
	}
	want, _ := expectedLen(dtype, uint64(n), uint64(d))
	got, ok := base64DecodedLen(s)
	if !ok || got != want {
		if err := checkBase64(s); err != nil {
			return nil, err
		}
		return nil, lengthMismatch("", got, want)
	}
	data := make([]byte, want)
	if err := decodeBase64Into(data, s); err != nil {
		return nil, err
	}
	if order == BigEndian {
		swapBytes(data, dtype.ItemSize())
	}
	return &Tensor{DType: dtype, N: n, D: d, Data: data}, nil
}

// base64DecodedLen predicts the decoded length of a well-formed string from its length and padding;
// ok is false when no well-formed string has this length (len mod 4 == 1).
func base64DecodedLen(s string) (n int, ok bool) {
	l := len(s)
	switch l % 4 {
	case 0:
		pad := 0
		if l > 0 && s[l-1] == '=' {
			pad = 1
			if s[l-2] == '=' {
				pad = 2
			}
		}
		return l/4*3 - pad, true
	case 1:
		return l / 4 * 3, false
	default:
		return l/4*3 + l%4 - 1, true
	}
}

// decodeBase64Into decodes s into dst, whose length base64DecodedLen predicted. Any failure, or an
// input that decodes to another length (skipped line breaks), is reported by checkBase64.
func decodeBase64Into(dst []byte, s string) *Error {
	enc := b64Padded
	if len(s)%4 != 0 {
		enc = b64Unpadded
	}
	n, err := enc.Decode(dst, bytesView(s))
	if err == nil && n == len(dst) {
		return nil
	}
	if e := checkBase64(s); e != nil {
		return e
	}
	return newError(InvalidBase64, "", 0, "invalid Base64") // not reached: checkBase64 accepts what Decode does
}

// checkBase64 applies the rules of SPEC.md section 5 one character at a time and returns the first
// violation, or nil.
func checkBase64(s string) *Error {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !b64Valid[c] && c != '=' {
			return newError(InvalidBase64, "", i, "invalid Base64 character "+quoteChar(s, i)+" at offset "+strconv.Itoa(i))
		}
	}
	p := -1
	for i := 0; i < len(s); i++ {
		if s[i] == '=' {
			p = i
			break
		}
	}
	if p >= 0 {
		bad := len(s)-p > 2 || len(s)%4 != 0 || (p%4 != 2 && p%4 != 3)
		for i := p; i < len(s) && !bad; i++ {
			bad = s[i] != '='
		}
		if bad {
			return newError(InvalidBase64, "", p, "misplaced or excess Base64 padding at offset "+strconv.Itoa(p))
		}
		return nil
	}
	if len(s)%4 == 1 {
		return newError(InvalidBase64, "", len(s)-1, "dangling Base64 character at offset "+strconv.Itoa(len(s)-1))
	}
	return nil
}

// quoteChar quotes the character at byte offset i for an error message (the whole UTF-8 sequence
// when it starts one).
func quoteChar(s string, i int) string {
	c := s[i]
	if c < 0x80 {
		return strconv.QuoteRune(rune(c))
	}
	end := i + 1
	for end < len(s) && end < i+4 && s[end]&0xc0 == 0x80 {
		end++
	}
	return strconv.Quote(s[i:end])
}
