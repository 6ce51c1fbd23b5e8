package densewire

import "strconv"

// DType is the element type of a tensor (SPEC.md section 2). Its values are the Protobuf enum values;
// the zero value is not a valid dtype.
type DType uint8

// The dtypes of SPEC.md section 2.
const (
	Float32  DType = 1 // IEEE 754 binary32; the default everywhere
	Float16  DType = 2 // IEEE 754 binary16
	BFloat16 DType = 3 // the top 16 bits of a binary32
	Float64  DType = 4 // IEEE 754 binary64
	Int8     DType = 5 // two's complement, carried as given
	Uint8    DType = 6 // carried as given
	Binary   DType = 7 // packed bits, most significant bit first (section 3.4)
)

var dtypeNames = [...]string{"", "float32", "float16", "bfloat16", "float64", "int8", "uint8", "binary"}

// String returns the wire name of the dtype ("float32", ...), or "DType(n)" for an invalid value.
func (t DType) String() string {
	if t.Valid() {
		return dtypeNames[t]
	}
	return "DType(" + strconv.Itoa(int(t)) + ")"
}

// Valid reports whether t is one of the seven dtypes of the spec.
func (t DType) Valid() bool { return t >= Float32 && t <= Binary }

// ItemSize is the number of bytes of one element, and 1 for Binary (one packed byte of 8 elements).
func (t DType) ItemSize() int {
	switch t {
	case Float64:
		return 8
	case Float32:
		return 4
	case Float16, BFloat16:
		return 2
	case Int8, Uint8, Binary:
		return 1
	}
	return 0
}

// RowBytes is row_bytes(dtype, d): the byte length of one row of d dimensions.
func (t DType) RowBytes(d int) int {
	if t == Binary {
		return (d + 7) / 8
	}
	return d * t.ItemSize()
}

// rowItems is the number of wire items in a row: d, or the packed bytes of a binary row.
func (t DType) rowItems(d int) int {
	if t == Binary {
		return (d + 7) / 8
	}
	return d
}

// ParseDType returns the dtype with this exact, lowercase wire name. Any other string is an
// UnknownDType error on the field "dtype".
func ParseDType(name string) (DType, error) {
	for i := Float32; i <= Binary; i++ {
		if dtypeNames[i] == name {
			return i, nil
		}
	}
	return 0, &Error{Category: UnknownDType, Field: "dtype", Offset: -1,
		Message: "unknown dtype " + strconv.Quote(name) + " (want one of float32, float16, bfloat16, float64, int8, uint8, binary)"}
}

// ByteOrder is the byte order of multi-byte items (SPEC.md section 4). The zero value is
// LittleEndian, the canonical order of every binary body.
type ByteOrder uint8

// The two byte orders. BigEndian exists for interoperability only (Base64 and the JSON envelope).
const (
	LittleEndian ByteOrder = 0
	BigEndian    ByteOrder = 1
)

// String returns "little" or "big".
func (o ByteOrder) String() string {
	switch o {
	case LittleEndian:
		return "little"
	case BigEndian:
		return "big"
	}
	return "ByteOrder(" + strconv.Itoa(int(o)) + ")"
}

// ParseByteOrder parses "little" or "big"; anything else is an InvalidField error on "byteorder".
func ParseByteOrder(name string) (ByteOrder, error) {
	switch name {
	case "little":
		return LittleEndian, nil
	case "big":
		return BigEndian, nil
	}
	return 0, &Error{Category: InvalidField, Field: "byteorder", Offset: -1,
		Message: "unknown byte order " + strconv.Quote(name) + ` (want "little" or "big")`}
}
