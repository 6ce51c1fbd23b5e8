package densewire

import (
	"net/http"
	"strconv"
	"strings"
)

// Headers of the raw body (SPEC.md section 7), in Go's canonical form.
const (
	HeaderVersion      = "Densewire-Version"
	HeaderDType        = "Densewire-Dtype"
	HeaderShape        = "Densewire-Shape"
	HeaderByteorder    = "Densewire-Byteorder"
	HeaderModel        = "Densewire-Model"
	HeaderPromptTokens = "Densewire-Prompt-Tokens"
	HeaderTotalTokens  = "Densewire-Total-Tokens"
	HeaderQuantization = "Densewire-Quantization"
)

// SetRawHeaders sets the headers that describe a raw body (SPEC.md section 7) in h: version, dtype,
// shape, byte order, and with a non-nil meta the model, the token counts and the quantization id
// (when not ""). The body itself is t.Data,
// which is already in the raw layout (little-endian, row-major): write it as it is.
func SetRawHeaders(h http.Header, t *Tensor, meta *Meta) {
	h.Set(HeaderVersion, "1")
	h.Set(HeaderDType, t.DType.String())
	h.Set(HeaderShape, strconv.Itoa(t.N)+","+strconv.Itoa(t.D))
	h.Set(HeaderByteorder, "little")
	if meta != nil {
		h.Set(HeaderModel, meta.Model)
		h.Set(HeaderPromptTokens, strconv.FormatUint(meta.PromptTokens, 10))
		h.Set(HeaderTotalTokens, strconv.FormatUint(meta.TotalTokens, 10))
		if meta.Quantization != "" {
			h.Set(HeaderQuantization, meta.Quantization)
		}
	}
}

// DecodeRaw decodes a raw body described by its headers (names are case-insensitive). A missing or
// malformed Densewire-Dtype or Densewire-Shape is an InvalidField error naming the header, an
// unknown dtype an UnknownDType error on Densewire-Dtype, a Densewire-Byteorder other than
// "little" an InvalidField error, a body of the wrong length a LengthMismatch error. The tensor
// aliases body. The meta is non-nil when Densewire-Model, a token header or
// Densewire-Quantization (the meta's Quantization) is present.
func DecodeRaw(h http.Header, body []byte) (*Tensor, *Meta, error) {
	if k, ok := headerValue(h, HeaderKind); ok { // SPEC.md 20: a tensor body says no kind
		return nil, nil, newError(InvalidField, HeaderKind, -1, "a tensor body has no "+HeaderKind+" header, this one says "+strconv.Quote(k)+": decode it with that kind's decoder")
	}
	name, ok := headerValue(h, HeaderDType)
	if !ok {
		return nil, nil, newError(InvalidField, HeaderDType, -1, "missing header "+HeaderDType)
	}
	dtype, err := ParseDType(name)
	if err != nil {
		e := err.(*Error)
		e.Field = HeaderDType
		return nil, nil, e
	}
	shape, ok := headerValue(h, HeaderShape)
	if !ok {
		return nil, nil, newError(InvalidField, HeaderShape, -1, "missing header "+HeaderShape)
	}
	n, d, ok := parseShape(shape)
	if !ok {
		return nil, nil, newError(InvalidField, HeaderShape, -1, "header "+HeaderShape+" must be \"n,d\" in decimal, got "+strconv.Quote(shape))
	}
	if bo, ok := headerValue(h, HeaderByteorder); ok && bo != "little" {
		return nil, nil, newError(InvalidField, HeaderByteorder, -1, "raw bodies are little-endian, got "+HeaderByteorder+": "+strconv.Quote(bo))
	}
	var meta *Meta
	model, hasModel := headerValue(h, HeaderModel)
	pt, hasPT := headerValue(h, HeaderPromptTokens)
	tt, hasTT := headerValue(h, HeaderTotalTokens)
	quant, hasQuant := headerValue(h, HeaderQuantization)
	if hasModel || hasPT || hasTT || hasQuant {
		meta = &Meta{Model: model, Quantization: strings.TrimSpace(quant)}
		if hasPT {
			if meta.PromptTokens, err = strconv.ParseUint(pt, 10, 64); err != nil {
				return nil, nil, newError(InvalidField, HeaderPromptTokens, -1, "header "+HeaderPromptTokens+" is not a count: "+strconv.Quote(pt))
			}
		}
		if hasTT {
			if meta.TotalTokens, err = strconv.ParseUint(tt, 10, 64); err != nil {
				return nil, nil, newError(InvalidField, HeaderTotalTokens, -1, "header "+HeaderTotalTokens+" is not a count: "+strconv.Quote(tt))
			}
		}
	}
	t, e := tensorFromWire(dtype, n, d, body, "")
	if e != nil {
		return nil, nil, e
	}
	return t, meta, nil
}

// headerValue looks a header up case-insensitively (also in maps not built by net/http).
func headerValue(h http.Header, name string) (string, bool) {
	if v, ok := h[name]; ok && len(v) > 0 {
		return v[0], true
	}
	for k, v := range h {
		if strings.EqualFold(k, name) && len(v) > 0 {
			return v[0], true
		}
	}
	return "", false
}

// parseShape parses "n,d": two decimal numbers, no sign, no spaces.
func parseShape(s string) (n, d uint64, ok bool) {
	a, b, found := strings.Cut(s, ",")
	if !found {
		return 0, 0, false
	}
	n, ok1 := parseDecimal(a)
	d, ok2 := parseDecimal(b)
	return n, d, ok1 && ok2
}

func parseDecimal(s string) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseUint(s, 10, 64)
	return v, err == nil
}
