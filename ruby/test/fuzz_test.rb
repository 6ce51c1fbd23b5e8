# frozen_string_literal: true

require_relative "test_helper"

# Seeded mutations of every golden binary body and JSON text (bytes flipped, cut short, inserted):
# a decoder either returns a result or raises a Densewire::Error, never anything else.
class FuzzTest < Minitest::Test
  MUTATIONS = Integer(ENV.fetch("FUZZ_MUTATIONS", 60))

  def mutate(rng, body)
    b = body.b.dup
    case rng.rand(4)
    when 0 then b.setbyte(rng.rand(b.bytesize), rng.rand(256)) unless b.empty?
    when 1 then b = b.byteslice(0, rng.rand(b.bytesize + 1))
    when 2 then b.insert(rng.rand(b.bytesize + 1), rng.bytes(1 + rng.rand(4)))
    else 3.times { b.setbyte(rng.rand(b.bytesize), rng.rand(256)) unless b.empty? }
    end
    b
  end

  def check(name, body, rng)
    MUTATIONS.times do
      input = mutate(rng, body)
      self.assertions += 1
      begin
        yield input
      rescue Densewire::Error
        nil
      rescue StandardError => e
        flunk "#{name}: #{e.class}: #{e.message} on #{input.unpack1("H*")[0, 200]}"
      end
    end
  end

  GoldenFiles.cases("tensors").group_by { |c| c["format"] }.each do |format, cases|
    define_method("test_mutated_#{format}_bodies_fail_cleanly") do
      rng = Random.new(1234)
      cases.each do |c|
        body = c["encoded_hex"] ? [c["encoded_hex"]].pack("H*") : c["encoded_text"]
        check(c["id"], body, rng) do |input|
          case format
          when "raw" then Densewire::Raw.decode(input, c["headers"])
          when "msgpack" then Densewire::Msgpack.decode(input)
          when "protobuf" then Densewire::Protobuf.decode(input, message: c["message"])
          when "arrow" then Densewire::Arrow.decode(input)
          when "json" then Densewire::JSONEnvelope.decode(input)
          when "base64" then Densewire::Base64.decode(input, dtype: c["dtype"], shape: c["shape"], byteorder: c["byteorder"])
          end
        end
      end
    end
  end

  # The same for every table body of tables.json, in every format (packed and not).
  GoldenFiles.cases("tables").reject { |c| c["id"].start_with?("invalid.") }.group_by { |c| c["format"] }.each do |format, cases|
    define_method("test_mutated_table_#{format.tr("-", "_")}_bodies_fail_cleanly") do
      rng = Random.new(4321)
      fmt = format.tr("-", "_").to_sym
      cases.each do |c|
        body = c["encoded_hex"] ? [c["encoded_hex"]].pack("H*") : c["encoded_text"]
        check(c["id"], body, rng) do |input|
          Densewire::Table.decode(input, format: fmt, headers: c["headers"], packed: rng.rand(2).zero?)
        end
      end
    end
  end
end
