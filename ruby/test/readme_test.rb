# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/fake_embeddings_server"

# Every ```ruby block of README.md runs, in order of appearance, as one test; a line ending in
# "# => VALUE" asserts that the line's value inspects as VALUE, and every such check must run.
# The client examples talk to the in-process fake server through DENSEWIRE_URL / DENSEWIRE_API_KEY.
class ReadmeTest < Minitest::Test
  README = File.expand_path("../README.md", __dir__)

  # The object README code runs in.
  class Sandbox
    attr_reader :checked

    def initialize(test)
      @test = test
      @checked = 0
    end

    def __readme_check__(line, actual, expected)
      @checked += 1
      @test.assert_equal expected, actual.inspect, "README.md line #{line}"
    end
  end

  def self.blocks
    blocks = []
    start = nil
    File.readlines(README).each_with_index do |line, i|
      if start.nil? && line.start_with?("```ruby")
        start = i + 2
        blocks << [start, +""]
      elsif start && line.start_with?("```")
        start = nil
      elsif start
        blocks.last[1] << line
      end
    end
    blocks
  end

  def setup
    @server = FakeEmbeddingsServer.new(api_key: "sk-readme")
    @env = ENV.to_h.slice("DENSEWIRE_URL", "DENSEWIRE_API_KEY")
    ENV["DENSEWIRE_URL"] = @server.url
    ENV["DENSEWIRE_API_KEY"] = "sk-readme"
  end

  def teardown
    @server.stop
    %w[DENSEWIRE_URL DENSEWIRE_API_KEY].each { |k| @env.key?(k) ? ENV[k] = @env[k] : ENV.delete(k) }
  end

  def test_readme_has_examples
    assert_operator self.class.blocks.size, :>=, 6
  end

  blocks.each do |first_line, code|
    define_method("test_readme_example_at_line_#{first_line}") do
      checks = 0
      source = code.lines.each_with_index.map do |line, i|
        m = /\A(\s*)(\S.*?)\s+# => (.*)\n?\z/.match(line)
        next line unless m

        checks += 1
        "#{m[1]}__readme_check__(#{first_line + i}, (#{m[2]}), #{m[3].strip.inspect})\n"
      end.join
      sandbox = Sandbox.new(self)
      sandbox.instance_eval(source, README, first_line)
      assert_equal checks, sandbox.checked, "every # => line of the block at README.md:#{first_line} must run"
    end
  end
end
