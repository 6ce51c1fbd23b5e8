# frozen_string_literal: true

module Densewire
  # Exact float conversions of SPEC.md section 3: round-to-nearest, ties-to-even, overflow to
  # infinity, NaN to the canonical quiet NaN with the sign kept. Everything works on bit patterns
  # (Integers), so NaN payloads and signed zeros are never lost to Ruby's Float.
  module Convert
    FLT_MAX = 3.4028234663852886e+38
    # [exponent bits, fraction bits]
    FORMATS = { "float16" => [5, 10], "bfloat16" => [8, 7], "float32" => [8, 23], "float64" => [11, 52] }.freeze

    module_function

    # Rounds the float64 with bit pattern +bits64+ to the IEEE binary format with +ebits+ exponent
    # and +mbits+ fraction bits. Returns the bit pattern.
    def round_f64_bits(bits64, ebits, mbits)
      sign = (bits64 >> 63) << (ebits + mbits)
      exp = (bits64 >> 52) & 0x7FF
      man = bits64 & 0xF_FFFF_FFFF_FFFF
      inf = ((1 << ebits) - 1) << mbits
      if exp == 0x7FF
        return sign | inf if man.zero?

        return sign | inf | (1 << (mbits - 1)) # canonical quiet NaN
      end
      if exp.zero?
        return sign if man.zero?

        e = -1074 # value = man * 2^e
      else
        man |= 1 << 52
        e = exp - 1075
      end
      bias = (1 << (ebits - 1)) - 1
      emin = 1 - bias
      top = man.bit_length - 1 + e # floor(log2(value))
      ulp = [top, emin].max - mbits # exponent of the target's last fraction bit
      shift = ulp - e
      if shift <= 0
        q = man << -shift
      else
        q = man >> shift
        rem = man & ((1 << shift) - 1)
        half = 1 << (shift - 1)
        q += 1 if rem > half || (rem == half && q.odd?)
      end
      if q >= 1 << (mbits + 1) # rounding carried into the next binade
        q >>= 1
        ulp += 1
      end
      return sign | q if q < 1 << mbits # subnormal or zero (q == 1 << mbits lands on the smallest normal)

      biased = ulp + mbits + bias
      return sign | inf if biased >= (1 << ebits) - 1

      sign | (biased << mbits) | (q - (1 << mbits))
    end

    def f64_bits(value)
      [Float(value)].pack("E").unpack1("Q<")
    end

    # A Ruby number (Float or Integer) rounded to a float dtype's bits; float64 is exact.
    def float_bits(value, dtype)
      return f64_bits(value) if dtype == "float64"

      round_f64_bits(f64_bits(value), *FORMATS.fetch(dtype))
    end

    # Exact widening of a float's bits to a wider float format, NaN payload and sign kept.
    def widen_bits(bits, from, to)
      se, sm = FORMATS.fetch(from)
      de, dm = FORMATS.fetch(to)
      exp = (bits >> sm) & ((1 << se) - 1)
      man = bits & ((1 << sm) - 1)
      if exp == (1 << se) - 1 && !man.zero?
        return ((bits >> (se + sm)) << (de + dm)) | (((1 << de) - 1) << dm) | (man << (dm - sm))
      end

      value = from == "float32" ? [bits].pack("L<").unpack1("e") : f16_or_bf16_value(bits, from)
      round_f64_bits(f64_bits(value), de, dm)
    end

    def f16_or_bf16_value(bits, dtype)
      dtype == "float16" ? f16_value(bits) : [bits << 16].pack("L<").unpack1("e")
    end

    # float32 bits to float16 bits (section 3.1).
    def f32_to_f16(bits)
      return ((bits >> 16) & 0x8000) | 0x7E00 if (bits & 0x7FFF_FFFF) > 0x7F80_0000

      round_f64_bits(f64_bits([bits].pack("L<").unpack1("e")), 5, 10)
    end

    # float32 bits to bfloat16 bits (section 3.2), exactly the spec's formula.
    def f32_to_bf16(bits)
      return ((bits >> 16) & 0x8000) | 0x7FC0 if (bits & 0x7FFF_FFFF) > 0x7F80_0000

      ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF
    end

    # float64 bits to float32 bits (section 3.3).
    def f64_to_f32(bits64)
      round_f64_bits(bits64, 8, 23)
    end

    # Packs Ruby numbers as little-endian float32 with section 3.3 rounding. Ruby's own pack("e")
    # is used when it is exact for the input (all finite and within the float32 range); it turns
    # values just above FLT_MAX into Infinity and drops the sign of NaN, so those take the exact path.
    def pack_float32(values)
      if values.sum.finite? && (values.empty? || (values.max <= FLT_MAX && values.min >= -FLT_MAX))
        values.pack("e*")
      else
        values.map { |v| round_f64_bits(f64_bits(v), 8, 23) }.pack("L<*")
      end
    end

    # Packs Ruby numbers as little-endian bytes of a float dtype.
    def pack_floats(values, dtype)
      case dtype
      when "float32" then pack_float32(values)
      when "float64" then values.pack("E*")
      when "float16" then values.map { |v| round_f64_bits(f64_bits(v), 5, 10) }.pack("S<*")
      when "bfloat16" then values.map { |v| round_f64_bits(f64_bits(v), 8, 7) }.pack("S<*")
      else raise ArgumentError, "not a float dtype: #{dtype}"
      end
    end

    # Section 3.4: one row of numbers to its packed bits (1 iff the value is > 0), MSB first, the
    # unused low bits of the last byte zero.
    def pack_bits(row)
      [row.map { |v| v > 0 ? "1" : "0" }.join].pack("B*")
    end

    # The exact value of float16 bits as a Ruby Float.
    def f16_value(bits)
      exp = (bits >> 10) & 0x1F
      man = bits & 0x3FF
      sign = bits >> 15 == 1 ? -1.0 : 1.0
      if exp == 0x1F
        return man.zero? ? sign * Float::INFINITY : (sign.negative? ? -Float::NAN : Float::NAN)
      end
      return sign * Math.ldexp(man, -24) if exp.zero?

      sign * Math.ldexp(man | 0x400, exp - 25)
    end

    # All 65536 float16 values, for decoding by table.
    def f16_table
      @f16_table ||= Array.new(1 << 16) { |b| f16_value(b) }.freeze
    end

    # Little-endian bytes of a dtype to Ruby numbers (Floats, or Integers for int8/uint8 and the
    # packed bytes of binary). float16 and bfloat16 widen exactly.
    def unpack(data, dtype)
      case dtype
      when "float32" then data.unpack("e*")
      when "float64" then data.unpack("E*")
      when "float16"
        table = f16_table
        codes = data.unpack("S<*")
        out = []
        (0...codes.size).step(4096) { |i| out.concat(table.values_at(*codes[i, 4096])) }
        out
      when "bfloat16"
        codes = data.unpack("v*")
        codes.pack("x2v" * codes.size).unpack("e*") # each item becomes the top half of a float32
      when "int8" then data.unpack("c*")
      else data.unpack("C*")
      end
    end

    # The shortest decimal (as a JSON number) that reads back, rounded to +dtype+, to the same bits
    # (section 3.5). +value+ is the exact Float value of +bits+, which must be finite.
    def shortest_decimal(value, bits, dtype)
      return value.to_s if dtype == "float64" # Ruby's Float#to_s is already shortest for float64
      return (bits >> (FORMATS[dtype].sum) == 1 ? "-0.0" : "0.0") if value.zero?

      ebits, mbits = FORMATS[dtype]
      # For a normal value, the digits any shorter decimal would have are already those of
      # start-digit rounding (whose %g strips trailing zeros); subnormals search from 1 digit.
      min_normal = Math.ldexp(1.0, 2 - (1 << (ebits - 1)))
      p = value.abs < min_normal ? 1 : { "float32" => 6, "float16" => 3, "bfloat16" => 2 }[dtype]
      loop do
        s = format("%.#{p}g", value)
        if p >= 17 || round_f64_bits(f64_bits(s.to_f), ebits, mbits) == bits
          # "3.0", not "3": the same number, but JSON readers then keep it a float
          return s.match?(/[.e]/) ? s : "#{s}.0"
        end

        p += 1
      end
    end
  end
end
