# frozen_string_literal: true

require_relative "test_helper"

# The golden runners' use of capabilities.json (support/golden_capabilities.rb): unclaimed cases are
# listed, not run.
class GoldenCapabilitiesTest < Minitest::Test
  def without(feature)
    caps = GoldenCapabilities.load
    assert caps["claims"]["ruby"].delete(feature), "ruby claims #{feature}"
    caps
  end

  def test_a_planted_unclaimed_feature_lists_its_cases_and_runs_none
    cases = GoldenFiles.cases("tensors")
    plan = GoldenCapabilities.plan({ "tensors.json" => cases }, caps: without("dtype.bfloat16"))
    bf16 = cases.select { |c| c["dtype"] == "bfloat16" }.map { |c| c["id"] }
    refute_empty bf16
    assert_equal({ "dtype.bfloat16" => bf16 }, plan.not_claimed)
    assert_empty plan.run & bf16
    assert_equal cases.size - bf16.size, plan.run.size
    assert_includes plan.lines, "not claimed by ruby: #{bf16.size} cases: dtype.bfloat16 (#{bf16.join(", ")})"
  end

  def test_an_unclaimed_table_format_lists_its_valid_and_invalid_cases
    cases = GoldenFiles.cases("tables")
    plan = GoldenCapabilities.plan({ "tables.json" => cases }, caps: without("table.csv"))
    ids = plan.not_claimed.fetch("table.csv")
    assert(ids.any? { |i| i.start_with?("table.csv.") } && ids.any? { |i| i.start_with?("invalid.table.csv.") })
    assert(cases.select { |c| plan.run.include?(c["id"]) }.none? { |c| c["format"] == "csv" })
  end

  def test_a_claimed_feature_no_golden_case_needs_is_reported
    caps = GoldenCapabilities.load
    caps["claims"]["ruby"] << "planted.feature"
    plan = GoldenCapabilities.plan({ "conversions.json" => GoldenFiles.cases("conversions") }, caps: caps)
    assert_includes plan.unexercised, "planted.feature"
    assert(plan.lines.any? { |l| l.start_with?("claimed by ruby but exercised by no golden case: ") && l.include?("planted.feature") })
  end

  def test_a_case_missing_from_capabilities_fails_the_runner
    caps = GoldenCapabilities.load
    caps["cases"]["interop.json"].delete("interop.openai.response_float")
    error = assert_raises(RuntimeError) do
      GoldenCapabilities.plan({ "interop.json" => GoldenFiles.cases("interop") }, caps: caps)
    end
    assert_includes error.message, "interop.openai.response_float is not in capabilities.json"
  end
end
