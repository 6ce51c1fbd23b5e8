# frozen_string_literal: true

# Per-token and sparse output (issue 32 item 6, SPEC.md 20), side by side in one run: the client-side
# decode of 100 documents x 256 tokens x 384 float32 (MiniLM's token-state shape, 39.3 MB of floats)
# as densewire's ragged raw, Arrow, MessagePack and Protobuf bodies against TEI's /embed_all JSON
# ([[[f32]]]) read by Ruby's JSON.parse (then packed into one float32 String, the shape the client
# returns); and 100 sparse vectors of 200 non-zeros over a vocabulary of 30,522 against TEI's
# /embed_sparse JSON ([[{"index", "value"}]]). Rounds interleaved (every decoder once a round, after
# one warm-up round), best and median.
#
#   ruby bench/ruby/tokens.rb [ROUNDS] [DOCS]        (defaults: 5 100)
#   ruby bench/ruby/tokens.rb --check                (a small batch: every body decodes to TEI's JSON)
#
# The values are the same synthetic ones in every language's bench (bench/RESULTS-tokens.md): entry e
# is float32(k) / 99991 - 0.5 with k = (e mod 100000) * 35761 mod 100000, computed in float32; TEI's
# JSON holds their shortest float32 decimals (as TEI's serde writes them).

$LOAD_PATH.unshift(File.expand_path("../../ruby/lib", __dir__))
require "densewire"
require "json"
require "etc"

CHECK = ARGV.first == "--check"
ROUNDS = CHECK ? 1 : Integer(ARGV[0] || 5)
DOCS = CHECK ? 3 : Integer(ARGV[1] || 100)
TOKENS = CHECK ? 5 : 256
D = CHECK ? 7 : 384
NNZ = CHECK ? 6 : 200
VOCAB = 30_522

def f32(x) = [x].pack("e").unpack1("e")
def k_of(e) = (e % 100_000) * 35_761 % 100_000

# the values take 100,000 distinct k: each one's float32 and shortest decimal computed once
tok_vals = Array.new(100_000) { |k| f32(f32(k / 99_991.0) - 0.5) }
sp_vals = Array.new(100_000) { |k| f32(f32(k / 99_991.0) * 3) }
decimal = lambda do |v|
  bits = [v].pack("e").unpack1("L<")
  Densewire::Convert.shortest_decimal(v, bits, "float32")
end
tok_text = tok_vals.map(&decimal)
sp_text = sp_vals.map(&decimal)

n_values = DOCS * TOKENS * D
packed = Array.new(n_values) { |e| tok_vals[k_of(e)] }.pack("e*")
offsets = Array.new(DOCS + 1) { |i| i * TOKENS }
ragged = Densewire::RaggedTensor.new(packed, dtype: "float32", d: D, offsets: offsets)
tei_tokens = +"["
DOCS.times do |i|
  tei_tokens << "," if i.positive?
  tei_tokens << "[" << Array.new(TOKENS) { |t| "[#{Array.new(D) { |j| tok_text[k_of((i * TOKENS + t) * D + j)] }.join(",")}]" }.join(",") << "]"
end
tei_tokens << "]"

sp_offsets = Array.new(DOCS + 1) { |i| i * NNZ }
sp_indices = Array.new(DOCS * NNZ) { |e| (e % NNZ) * 150 + (e / NNZ * 7) % 150 }
sp_values = Array.new(DOCS * NNZ) { |e| sp_vals[k_of(e)] }
sparse = Densewire::SparseTensor.new(sp_values.pack("e*"), dtype: "float32", vocabulary: VOCAB, offsets: sp_offsets, indices: sp_indices)
tei_sparse = "[#{Array.new(DOCS) { |i| "[#{Array.new(NNZ) { |j| e = i * NNZ + j; %({"index":#{sp_indices[e]},"value":#{sp_text[k_of(e)]}}) }.join(",")}]" }.join(",")}]"

K = Densewire::Kinds
bodies = {}
{ "ragged" => ragged, "sparse" => sparse }.each do |kind, t|
  headers, raw = K.encode_raw(t, model: "bench-model")
  bodies[kind] = { raw: raw, headers: headers, arrow: K.encode_arrow(t, model: "bench-model"),
                   msgpack: K.encode_msgpack(t, model: "bench-model"), protobuf: K.encode_protobuf(t, model: "bench-model") }
end
message = { "ragged" => "RaggedEmbeddingsResponse", "sparse" => "SparseEmbeddingsResponse" }

# TEI's JSON as a client reads it: JSON.parse, then the client's shape (offsets and packed values)
tei_decoders = {
  "ragged" => ["TEI JSON [[[f32]]], JSON.parse + pack", tei_tokens, lambda do
    doc = JSON.parse(tei_tokens)
    [doc.each_with_object([0]) { |m, o| o << (o[-1] + m.size) }, doc.flatten.pack("e*")]
  end],
  "sparse" => ["TEI JSON [[{index, value}]], JSON.parse", tei_sparse, lambda do
    doc = JSON.parse(tei_sparse)
    flat = doc.flatten
    [doc.each_with_object([0]) { |v, o| o << (o[-1] + v.size) }, flat.map { |x| x["index"] }, flat.map { |x| x["value"] }.pack("e*")]
  end],
}
decoders = {}
%w[ragged sparse].each do |kind|
  b = bodies[kind]
  name, text, fn = tei_decoders[kind]
  decoders[kind] = [
    [name, text.bytesize, fn],
    ["densewire #{kind} raw", b[:raw].bytesize, -> { K.decode_raw(b[:raw], b[:headers], kind: kind) }],
    ["densewire #{kind} Arrow", b[:arrow].bytesize, -> { K.decode_arrow(b[:arrow], kind: kind) }],
    ["densewire #{kind} MessagePack", b[:msgpack].bytesize, -> { K.decode_msgpack(b[:msgpack], kind: kind) }],
    ["densewire #{kind} Protobuf", b[:protobuf].bytesize, -> { K.decode_protobuf(b[:protobuf], kind: kind, message: message[kind]) }],
  ]
end

if CHECK
  %w[ragged sparse].each do |kind|
    want = decoders[kind][0][2].call
    decoders[kind][1..].each do |name, _, fn|
      t = fn.call
      got = kind == "ragged" ? [t.offsets, t.data] : [t.offsets, t.indices, t.data]
      abort "tokens.rb --check: #{name} differs from TEI's JSON" unless got == want
    end
  end
  puts "tokens.rb --check: every ragged and sparse body decodes to TEI's JSON, bit for bit"
  exit
end

def clock = Process.clock_gettime(Process::CLOCK_MONOTONIC)

puts "ruby #{RUBY_VERSION} (#{RUBY_PLATFORM}#{defined?(RubyVM::YJIT) && RubyVM::YJIT.enabled? ? ", YJIT" : ""}), json #{JSON::VERSION}, " \
     "msgpack #{MessagePack::VERSION}; #{File.read("/proc/cpuinfo")[/model name\s*:\s*(.*)/, 1]} x #{Etc.nprocessors}"
puts "load average #{File.read("/proc/loadavg").split[0, 3].join(" / ")}; #{ROUNDS} interleaved rounds after one warm-up round; " \
     "decoders under 1 ms timed over 100 calls a round"
%w[ragged sparse].each do |kind|
  cases = decoders[kind]
  times = cases.map { [] }
  calls = cases.map { 1 }
  (-1...ROUNDS).each do |r|
    cases.each_with_index do |(_, _, fn), i|
      t0 = clock
      calls[i].times { fn.call }
      dt = (clock - t0) / calls[i]
      if r.negative?
        calls[i] = 100 if dt < 1e-3
      else
        times[i] << dt
      end
    end
  end
  best = times.map(&:min)
  median = times.map { |ts| ts.sort[ts.size / 2] }
  puts
  puts kind == "ragged" ? "#{DOCS} documents x #{TOKENS} tokens x #{D} float32" : "#{DOCS} sparse vectors x #{NNZ} non-zeros over #{VOCAB}"
  puts "| decoder | bytes | x TEI bytes | best ms | median ms | x JSON (best) | x JSON (median) |"
  puts "|---|---:|---:|---:|---:|---:|---:|"
  cases.each_with_index do |(name, bytes, _), i|
    puts format("| %s | %d | %.3f | %.4f | %.4f | %.1f | %.1f |", name, bytes, bytes.to_f / cases[0][1], best[i] * 1e3, median[i] * 1e3,
                best[0] / best[i], median[0] / median[i])
  end
end
puts
puts "load average at the end #{File.read("/proc/loadavg").split[0, 3].join(" / ")}"
