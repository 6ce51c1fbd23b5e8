# frozen_string_literal: true

require_relative "test_helper"

# The golden cases of SPEC.md section 18.4, testdata/golden/retry.json: one test per case id Ruby
# claims (capabilities.json). The wait before a retry, or giving up, from the failed answer's status
# and Retry-After, the retry number, the policy and the random draw (injected as the policy's
# +random+), through Densewire::Retry#wait, the function the client's retry loop calls; waits
# compared bit for bit.
class RetryGoldenTest < Minitest::Test
  FILE = "retry"
  CLAIMED = GoldenCapabilities.claimed([FILE])

  # A random source that always draws the same number.
  Draw = Struct.new(:value) do
    def rand
      value
    end
  end

  def self.f64(bits)
    [bits].pack("H*").unpack1("G")
  end

  def bits(x)
    [x].pack("G").unpack1("H*")
  end

  def check(c)
    draw = self.class.f64(c["draw_bits"])
    assert_equal Float(c["draw"]), draw, "draw and draw_bits"
    policy = Densewire::Retry.new(max_retries: c["max_retries"], base_delay: self.class.f64(c["base_bits"]),
                                  max_delay: self.class.f64(c["cap_bits"]), random: Draw.new(draw))
    wait = policy.wait(c["retry"], status: c["status"], retry_after: c["retry_after"], now: c["now"].to_f)
    if c.key?("wait")
      refute_nil wait, "gave up; the spec waits #{c["wait"]} s"
      assert_equal c["wait_bits"], bits(wait), "waits #{wait.inspect} s; the spec #{c["wait"]}"
      return
    end
    assert_nil wait, "waits #{wait.inspect} s; the spec gives up (#{c["give_up"]})"
    return unless c["give_up"] == "retry_after_too_long"

    seconds = Densewire::Retry.parse_retry_after(c["retry_after"], now: c["now"].to_f) # the value the 429/503 error carries
    assert_operator seconds, :>, Densewire::Retry::MAX_RETRY_AFTER
    assert_equal Float(c["retry_after_seconds"]), seconds
  end

  GoldenFiles.cases(FILE).each do |c|
    next unless CLAIMED.include?(c["id"])

    define_method("test_#{c["id"]}") { check(c) }
  end
end
