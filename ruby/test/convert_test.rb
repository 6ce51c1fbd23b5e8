# frozen_string_literal: true

require_relative "test_helper"

class ConvertTest < Minitest::Test
  C = Densewire::Convert

  def f32(bits)
    [bits].pack("L<").unpack1("e")
  end

  # Every float16 value widens to float32 and converts back to the same bits (NaN: canonical).
  def test_float16_round_trips_through_float32_for_all_65536_patterns
    (0...(1 << 16)).each do |h|
      f = Densewire::Tensor.from_bits([h], dtype: "float16", shape: [1, 1]).convert("float32").bits[0]
      back = C.f32_to_f16(f)
      nan = (h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0
      assert_equal(nan ? (h & 0x8000) | 0x7E00 : h, back, format("%04x", h))
    end
  end

  def test_float16_table_values
    assert_equal 65_504.0, C.f16_value(0x7bff)
    assert_equal 2.0**-24, C.f16_value(0x0001)
    assert_equal(-0.0, C.f16_value(0x8000))
    assert C.f16_value(0x8000).to_s.start_with?("-")
    assert C.f16_value(0x7e00).nan?
  end

  # Random float32 values: float16 and bfloat16 rounding agree with an exact Rational reference.
  def test_rounding_matches_an_exact_reference
    rng = Random.new(42)
    2000.times do
      bits = rng.rand(1 << 32)
      next if (bits & 0x7F800000) == 0x7F800000

      v = f32(bits)
      assert_equal reference(v, 5, 10), C.f32_to_f16(bits), format("f16 %08x", bits)
      assert_equal reference(v, 8, 7), C.f32_to_bf16(bits), format("bf16 %08x", bits)
    end
  end

  def test_float64_to_float32_near_the_top
    assert_equal 0x7f7fffff, C.f64_to_f32(C.f64_bits(3.4028235e38))           # above FLT_MAX, rounds down
    assert_equal 0x7f800000, C.f64_to_f32(C.f64_bits(3.4028235677973366e38))  # the tie rounds to even: inf
    assert_equal 0x7f7fffff, C.f64_to_f32(C.f64_bits(3.4028235677973362e38))  # just below the tie
    assert_equal 0xff7fffff, C.pack_float32([-3.4028235e38]).unpack1("L<")
    assert_equal [0x7fc00000, 0xffc00000], C.pack_float32([Float::NAN, -Float::NAN]).unpack("L<*")
  end

  def test_pack_floats_for_float16_and_bfloat16_round_from_float64_directly
    # 1 + 2^-11 + 2^-30 is above the float16 tie, but rounding through float32 first would land on the tie.
    v = 1.0 + 2.0**-11 + 2.0**-30
    assert_equal [0x3c01], C.pack_floats([v], "float16").unpack("S<*")
    assert_equal [0x3f81], C.pack_floats([1.0 + 2.0**-8 + 2.0**-30], "bfloat16").unpack("S<*")
  end

  def test_shortest_decimals
    t = Densewire::Tensor.from_values([[0.1, 1e20, 3.4028234663852886e38, 1e-45, -0.0, 16_777_216.0, 1.1]])
    out = t.bits.zip(t.to_a).map { |b, v| C.shortest_decimal(v, b, "float32") }
    assert_equal ["0.1", "1e+20", "3.4028235e+38", "1e-45", "-0.0", "16777216.0", "1.1"], out
    assert_equal "0.1", C.shortest_decimal(C.f16_value(0x2e66), 0x2e66, "float16")
    assert_equal "6e-08", C.shortest_decimal(C.f16_value(0x0001), 0x0001, "float16")
    assert_equal "0.1", C.shortest_decimal(f32(0x3dcd0000), 0x3dcd, "bfloat16")
    assert_equal "0.1", C.shortest_decimal(0.1, C.f64_bits(0.1), "float64")
  end

  private

  # Exact round-to-nearest-even of a finite Float into (ebits, mbits), by Rationals.
  def reference(value, ebits, mbits)
    sign = value.to_s.start_with?("-") ? 1 << (ebits + mbits) : 0
    x = value.abs.to_r
    return sign if x.zero?

    bias = (1 << (ebits - 1)) - 1
    e = [Math.log2(x).floor, 1 - bias].max
    e -= 1 while e > 1 - bias && Rational(2)**e > x
    e += 1 while Rational(2)**(e + 1) <= x
    scaled = x / Rational(2)**(e - mbits)
    q, r = scaled.numerator.divmod(scaled.denominator)
    q += 1 if 2 * r > scaled.denominator || (2 * r == scaled.denominator && q.odd?)
    if q >= 1 << (mbits + 1)
      q >>= 1
      e += 1
    end
    return sign | q if q < 1 << mbits
    return sign | (((1 << ebits) - 1) << mbits) if e + bias >= (1 << ebits) - 1

    sign | ((e + bias) << mbits) | (q - (1 << mbits))
  end
end
