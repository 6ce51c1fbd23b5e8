package densewire

import (
	"net/http"
	"sync"
)

// Arrow support lives in the subpackage arrowipc (it brings in github.com/apache/arrow-go), which
// registers its codec here when imported, as image/png does for image.Decode:
//
//	import _ "github.com/densewire/densewire/go/arrowipc"
var (
	arrowMu  sync.RWMutex
	arrowEnc func(*Tensor, *Meta) ([]byte, error)
	arrowDec func([]byte) (*Tensor, *Meta, error)
)

// RegisterArrow installs the Arrow IPC stream codec used by Encode, Decode, the Client and the
// handlers. The arrowipc package calls it from its init function; other code need not.
func RegisterArrow(encode func(*Tensor, *Meta) ([]byte, error), decode func([]byte) (*Tensor, *Meta, error)) {
	arrowMu.Lock()
	defer arrowMu.Unlock()
	arrowEnc, arrowDec = encode, decode
}

func arrowCodec() (func(*Tensor, *Meta) ([]byte, error), func([]byte) (*Tensor, *Meta, error)) {
	arrowMu.RLock()
	defer arrowMu.RUnlock()
	return arrowEnc, arrowDec
}

// ArrowAvailable reports whether an Arrow codec is registered (package arrowipc imported).
func ArrowAvailable() bool {
	enc, dec := arrowCodec()
	return enc != nil && dec != nil
}

func arrowMissing() *Error {
	return newError(UnsupportedMediaType, "", -1,
		"Arrow needs the codec of github.com/densewire/densewire/go/arrowipc: import it")
}

// Encode writes the tensor (and meta, for an embeddings response) in format f. For FormatRaw the
// description goes into the headers h, which must then be non-nil; Content-Type is not set.
// JSON bodies are written with opts.
func Encode(f Format, t *Tensor, meta *Meta, h http.Header, opts JSONOptions) ([]byte, error) {
	switch f {
	case FormatJSON:
		return EncodeJSON(t, meta, opts)
	case FormatRaw:
		if h == nil {
			return nil, newError(InvalidField, "", -1, "raw bodies need a header to describe them")
		}
		SetRawHeaders(h, t, meta)
		return t.Data, nil
	case FormatMsgpack:
		return EncodeMsgpack(t, meta), nil
	case FormatProtobuf:
		return EncodeProtobuf(t, meta), nil
	case FormatArrow:
		enc, _ := arrowCodec()
		if enc == nil {
			return nil, arrowMissing()
		}
		return enc(t, meta)
	}
	return nil, newError(UnsupportedMediaType, "", -1, "unknown format "+f.String())
}

// Decode decodes a body of format f; h holds the headers of a raw body. Protobuf bodies are read as
// EmbeddingsResponse messages (use DecodeProtobufTensor for a bare Tensor).
func Decode(f Format, h http.Header, body []byte) (*Tensor, *Meta, error) {
	switch f {
	case FormatJSON:
		return DecodeJSON(body)
	case FormatRaw:
		return DecodeRaw(h, body)
	case FormatMsgpack:
		return DecodeMsgpack(body)
	case FormatProtobuf:
		return DecodeProtobuf(body)
	case FormatArrow:
		_, dec := arrowCodec()
		if dec == nil {
			return nil, nil, arrowMissing()
		}
		return dec(body)
	}
	return nil, nil, newError(UnsupportedMediaType, "", -1, "unknown format "+f.String())
}
