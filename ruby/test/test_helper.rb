# frozen_string_literal: true

$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "json"
require "minitest/autorun"
require "densewire"

module GoldenFiles
  module_function

  # The repository root: the first directory above this file that holds testdata/golden.
  def root
    @root ||= begin
      dir = __dir__
      dir = File.dirname(dir) until File.exist?(File.join(dir, "testdata", "golden", "tensors.json")) || dir == "/"
      raise "testdata/golden not found above #{__dir__}" if dir == "/"

      dir
    end
  end

  def cases(name)
    JSON.parse(File.read(File.join(root, "testdata", "golden", "#{name}.json")))["cases"]
  end

  # Items (hex in natural, big-endian notation) as little-endian bytes.
  def le_bytes(items)
    items.map { |h| [h].pack("H*").reverse }.join.b
  end

  def bits(items)
    items.map { |h| h.to_i(16) }
  end

  def hex(bytes)
    bytes.unpack1("H*")
  end

  def tensor(c)
    Densewire::Tensor.new(le_bytes(c["items"]), dtype: c["dtype"], shape: c["shape"])
  end

  def msgpack?
    Densewire::Msgpack.library
    true
  rescue LoadError
    false
  end

  def google_protobuf?
    Densewire::Protobuf.messages
    true
  rescue LoadError
    false
  end
end

# The assertions of an invalid golden case: the error's category, class, and offset and field where
# the case gives them.
module GoldenAssertions
  def assert_golden_error(c, error)
    assert_equal c["error"], error.category, error.message
    assert_equal c["offset"], error.offset, error.message if c.key?("offset")
    assert_equal c["field"], error.field, error.message if c.key?("field")
    assert_kind_of Densewire::Error.for_category(c["error"]), error
  end
end
Minitest::Test.include(GoldenAssertions)

require_relative "support/golden_capabilities"
