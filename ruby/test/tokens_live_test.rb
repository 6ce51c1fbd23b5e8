# frozen_string_literal: true

require_relative "test_helper"

# Per-token embeddings (Client#embed_tokens, TEI's POST /embed_all) from the real server with the
# built-in MiniLM model: DENSEWIRE_OVERLOAD_URL, which scripts/test.sh starts (the hash model of
# DENSEWIRE_SERVER_URL has no token states). Every format gives TEI's JSON matrices bit for bit.
class TokensLiveTest < Minitest::Test
  URL = ENV["DENSEWIRE_OVERLOAD_URL"]
  TEXTS = ["a cat sits on the mat", "hi", "the quick brown fox jumps over the lazy dog"].freeze

  def tokens(format)
    Densewire::Client.open(base_url: URL, formats: [format], max_retries: 8, retry_max_delay: 2.0) { |c| c.embed_tokens(TEXTS) }
  end

  def test_every_format_gives_tei_json_matrices
    if URL.nil?
      flunk "DENSEWIRE_OVERLOAD_URL is not set, and CI=true: scripts/test.sh must start that server" if ENV["CI"] == "true"
      skip "DENSEWIRE_OVERLOAD_URL is not set (scripts/test.sh starts densewire serve with the built-in model there)"
    end
    tei = tokens(:json)
    assert_equal [3, 384], tei.shape
    counts = (0...3).map { |i| tei.matrix(i).shape[0] }
    assert counts[1] < counts[0] && counts[0] < counts[2] && counts[1] >= 3, "token counts #{counts}"
    %i[raw msgpack protobuf arrow].each do |format|
      t = tokens(format)
      assert_equal ["float32", tei.offsets], [t.dtype, t.offsets], format
      assert_equal tei.data, t.data, "#{format}: the rows differ from TEI's JSON"
    end
  end
end
