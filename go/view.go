package densewire

import (
	"encoding/binary"
	"math/bits"
	"unsafe"
)

// hostLittleEndian is true on little-endian machines, where wire bytes are native float bytes.
var hostLittleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// ViewFloat32 returns b as a []float32 sharing b's memory, without copying. It does so only when
// that is sound: the host is little-endian (the wire order), len(b) is a multiple of 4 and b starts
// on a 4-byte boundary. Otherwise it returns nil, false, and the caller copies (Tensor.Float32).
// Buffers that densewire allocates (Base64 and JSON decoding, client bodies) are always aligned;
// data inside a MessagePack or Protobuf body usually is not.
func ViewFloat32(b []byte) ([]float32, bool) {
	if !hostLittleEndian || len(b)%4 != 0 {
		return nil, false
	}
	if len(b) == 0 {
		return []float32{}, true
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	if uintptr(p)%unsafe.Alignof(float32(0)) != 0 {
		return nil, false
	}
	return unsafe.Slice((*float32)(p), len(b)/4), true
}

// ViewFloat64 is ViewFloat32 for float64 data (8-byte multiple, 8-byte aligned).
func ViewFloat64(b []byte) ([]float64, bool) {
	if !hostLittleEndian || len(b)%8 != 0 {
		return nil, false
	}
	if len(b) == 0 {
		return []float64{}, true
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	if uintptr(p)%unsafe.Alignof(float64(0)) != 0 {
		return nil, false
	}
	return unsafe.Slice((*float64)(p), len(b)/8), true
}

// Float32Bytes returns the memory of v as little-endian bytes without copying on a little-endian
// host (the slice aliases v), and a little-endian copy on a big-endian one. It is the inverse of
// ViewFloat32, for building a Float32 tensor from a []float32 at no cost.
func Float32Bytes(v []float32) []byte {
	if hostLittleEndian {
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
	}
	out := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(out[4*i:], f32bits(f))
	}
	return out
}

// float64Bytes is Float32Bytes for float64.
func float64Bytes(v []float64) []byte {
	if hostLittleEndian {
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 8*len(v))
	}
	out := make([]byte, 8*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint64(out[8*i:], f64bits(f))
	}
	return out
}

// float32sFromLE fills dst from little-endian bytes: one memmove on a little-endian host. Writing
// through a byte view of dst needs no alignment of src.
func float32sFromLE(dst []float32, src []byte) {
	if hostLittleEndian {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(dst))), 4*len(dst)), src)
		return
	}
	for i := range dst {
		dst[i] = f32frombits(binary.LittleEndian.Uint32(src[4*i:]))
	}
}

func float64sFromLE(dst []float64, src []byte) {
	if hostLittleEndian {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(dst))), 8*len(dst)), src)
		return
	}
	for i := range dst {
		dst[i] = f64frombits(binary.LittleEndian.Uint64(src[8*i:]))
	}
}

// bytesView returns the bytes of a string without copying; the caller must not modify them.
func bytesView(s string) []byte {
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

// stringView returns b as a string without copying; b must not change while the string is used.
func stringView(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}

func le16(b []byte) uint16 { return binary.LittleEndian.Uint16(b) }
func le64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }

// swapBytes reverses each width-byte item of b in place (little <-> big endian).
func swapBytes(b []byte, width int) {
	switch width {
	case 2:
		for i := 0; i+1 < len(b); i += 2 {
			b[i], b[i+1] = b[i+1], b[i]
		}
	case 4:
		for i := 0; i+3 < len(b); i += 4 {
			binary.LittleEndian.PutUint32(b[i:], binary.BigEndian.Uint32(b[i:]))
		}
	case 8:
		for i := 0; i+7 < len(b); i += 8 {
			binary.LittleEndian.PutUint64(b[i:], binary.BigEndian.Uint64(b[i:]))
		}
	}
}

// swappedCopy writes src into dst with each width-byte item reversed. Items of 2 and 4 bytes
// are swapped 8 bytes at a time (a byte reversal of the 64-bit word, then the lanes put back in
// order), which halves or quarters the loop of a PostgreSQL COPY or big-endian Base64 row.
func swappedCopy(dst, src []byte, width int) {
	switch width {
	case 2:
		i := 0
		for ; i+8 <= len(src); i += 8 {
			v := binary.LittleEndian.Uint64(src[i:])
			binary.LittleEndian.PutUint64(dst[i:], (v&0x00ff00ff00ff00ff)<<8|(v>>8)&0x00ff00ff00ff00ff)
		}
		for ; i+1 < len(src); i += 2 {
			binary.BigEndian.PutUint16(dst[i:], binary.LittleEndian.Uint16(src[i:]))
		}
	case 4:
		i := 0
		for ; i+8 <= len(src); i += 8 {
			v := binary.LittleEndian.Uint64(src[i:])
			binary.LittleEndian.PutUint64(dst[i:], bits.RotateLeft64(bits.ReverseBytes64(v), 32))
		}
		for ; i+3 < len(src); i += 4 {
			binary.BigEndian.PutUint32(dst[i:], binary.LittleEndian.Uint32(src[i:]))
		}
	case 8:
		for i := 0; i+7 < len(src); i += 8 {
			binary.BigEndian.PutUint64(dst[i:], binary.LittleEndian.Uint64(src[i:]))
		}
	default:
		copy(dst, src)
	}
}
