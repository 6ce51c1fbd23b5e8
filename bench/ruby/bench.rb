# frozen_string_literal: true

# The published Ruby case, side by side in one run: a Rails app receives 1,000 x 1,536 float32
# embeddings from a Python service. Baseline: JSON.parse of float arrays (as Python's json writes
# them: float64 repr of each float32). Against it: densewire's decoders for Base64 rows in the JSON
# envelope (to Floats, and to packed Strings), raw, MessagePack, Protobuf and Arrow bodies, and the
# client's HTTP round trip over loopback against an in-process server (bench/ruby/roundtrip.sh runs
# the round trip against the real `densewire serve`).
#
#   ruby bench/ruby/bench.rb [N_ROWS] [DIMS] [ROUNDS]     (defaults: 1000 1536 9)
#   ruby --yjit bench/ruby/bench.rb                      (the same with YJIT)

$LOAD_PATH.unshift(File.expand_path("../../ruby/lib", __dir__))
require "densewire"
require "json"
require "base64"
require_relative "../../ruby/test/support/tiny_http_server"

N = Integer(ARGV[0] || 1000)
D = Integer(ARGV[1] || 1536)
ROUNDS = Integer(ARGV[2] || 9)

# Unit-norm vectors of Gaussian components, as embedding models return them, rounded to float32.
rng = Random.new(42)
values = Array.new(N * D) { Math.sqrt(-2 * Math.log(1 - rng.rand)) * Math.cos(2 * Math::PI * rng.rand) }
values.each_slice(D).with_index do |row, i|
  norm = Math.sqrt(row.sum { |v| v * v })
  row.each_with_index { |v, j| values[i * D + j] = v / norm }
end
tensor = Densewire::Tensor.from_values(values, shape: [N, D])
floats = tensor.rows # exact float32 values as Ruby Floats
usage = { prompt_tokens: 5 * N, total_tokens: 5 * N }

# What the Python service sends: json.dumps of ndarray.tolist(), float64 digits of float32 values.
python_json = JSON.generate({ "object" => "list",
                              "data" => floats.each_with_index.map { |r, i| { "object" => "embedding", "index" => i, "embedding" => r } },
                              "model" => "m", "usage" => { "prompt_tokens" => 5 * N, "total_tokens" => 5 * N } })
shortest_json = Densewire::JSONEnvelope.encode(tensor, encoding_format: "float", model: "m", usage: usage)
b64_json = Densewire::JSONEnvelope.encode(tensor, encoding_format: "base64", model: "m", usage: usage)
raw_headers, raw_body = Densewire::Raw.encode(tensor, model: "m", usage: usage)
msgpack_body = Densewire::Msgpack.encode(tensor, model: "m", usage: usage)
pb_body = Densewire::Protobuf.encode(tensor, message: "EmbeddingsResponse", model: "m", usage: usage)
arrow_body = Densewire::Arrow.encode(tensor, model: "m", usage: usage)

# Every case runs once per round, all cases in each round, so that the load of a shared machine
# drifts over all of them alike; ROUNDS rounds, then min and median per case of the wall time, and the
# min of the process CPU time (less sensitive to other processes taking the cores; in the HTTP cases
# it includes the in-process server thread).
CASES = []
def bench_case(group, name, body_bytes, &blk)
  CASES << { group: group, name: name, bytes: body_bytes, blk: blk, times: [], cpu: [] }
end

def check_rows(rows, expected)
  raise "decoded rows differ" unless rows.size == expected.size && rows[0] == expected[0] && rows[-1] == expected[-1]

  rows
end

group = "decode (body already in memory)"
row = ->(name, body_bytes, &blk) { bench_case(group, name, body_bytes, &blk) }
row.call("JSON.parse, float arrays (Python json.dumps digits)  [baseline]", python_json.bytesize) do
  check_rows(JSON.parse(python_json)["data"].map { |e| e["embedding"] }, floats)
end
row.call("JSON.parse, float arrays (shortest float32 digits)", shortest_json.bytesize) do
  JSON.parse(shortest_json)["data"].map { |e| e["embedding"] }
end
row.call("densewire JSONEnvelope.decode, float arrays -> Floats (exact float32 rounding)", python_json.bytesize) do
  check_rows(Densewire::JSONEnvelope.decode(python_json).to_a, floats)
end
row.call("hand-written: JSON.parse + Base64.strict_decode64 + unpack(\"e*\") per row", b64_json.bytesize) do
  check_rows(JSON.parse(b64_json)["data"].map { |e| Base64.strict_decode64(e["embedding"]).unpack("e*") }, floats)
end
row.call("densewire JSONEnvelope.decode, Base64 rows -> Floats", b64_json.bytesize) do
  check_rows(Densewire::JSONEnvelope.decode(b64_json).to_a, floats)
end
whole_b64 = [tensor.data].pack("m0")
row.call("lower bound: one unpack1(\"m0\") of the whole tensor's Base64 + unpack(\"e*\") + row slices, no JSON", whole_b64.bytesize) do
  flat = whole_b64.unpack1("m0").unpack("e*")
  check_rows(Array.new(N) { |i| flat[i * D, D] }, floats)
end
row.call("densewire JSONEnvelope.decode, Base64 rows -> packed String rows", b64_json.bytesize) do
  Densewire::JSONEnvelope.decode(b64_json).packed_rows
end
row.call("densewire Raw.decode -> Floats", raw_body.bytesize) { check_rows(Densewire::Raw.decode(raw_body, raw_headers).to_a, floats) }
row.call("densewire Raw.decode -> packed String rows", raw_body.bytesize) { Densewire::Raw.decode(raw_body, raw_headers).packed_rows }
row.call("densewire Msgpack.decode -> Floats", msgpack_body.bytesize) { check_rows(Densewire::Msgpack.decode(msgpack_body).to_a, floats) }
row.call("densewire Msgpack.decode -> packed String rows", msgpack_body.bytesize) { Densewire::Msgpack.decode(msgpack_body).packed_rows }
row.call("densewire Protobuf.decode -> Floats", pb_body.bytesize) do
  check_rows(Densewire::Protobuf.decode(pb_body, message: "EmbeddingsResponse").to_a, floats)
end
row.call("densewire Arrow.decode -> Floats", arrow_body.bytesize) { check_rows(Densewire::Arrow.decode(arrow_body).to_a, floats) }
row.call("densewire Arrow.decode -> packed String rows", arrow_body.bytesize) { Densewire::Arrow.decode(arrow_body).packed_rows }

group = "making the Floats from 6 MB of float32 bytes (ways compared to pick Tensor#rows' one)"
f32 = tensor.data
row.call("unpack(\"e*\"), then rows as shared slices flat[i * d, d] (Tensor#rows)", f32.bytesize) do
  flat = f32.unpack("e*")
  check_rows(Array.new(N) { |i| flat[i * D, D] }, floats)
end
row.call("unpack(\"e*\").each_slice(d).to_a", f32.bytesize) { check_rows(f32.unpack("e*").each_slice(D).to_a, floats) }
row.call("unpack(\"e#{D}\", offset: i * row_bytes) per row", f32.bytesize) do
  check_rows(Array.new(N) { |i| f32.unpack("e#{D}", offset: i * D * 4) }, floats)
end
row.call("unpack(\"e*\") alone, no rows (the floor of any Floats result)", f32.bytesize) { f32.unpack("e*") }
row.call("unpack1(\"m0\") of the whole tensor's Base64 alone (the floor of any Base64 decode)", whole_b64.bytesize) do
  whole_b64.unpack1("m0")
end
row.call("Base64.strict_decode64 of the whole tensor's Base64 alone", whole_b64.bytesize) { Base64.strict_decode64(whole_b64) }

group = "encode (what a Ruby service would send)"
row.call("JSON.generate, float arrays", python_json.bytesize) do
  JSON.generate({ "data" => floats.each_with_index.map { |r, i| { "object" => "embedding", "index" => i, "embedding" => r } } })
end
row.call("densewire JSONEnvelope.encode, Base64 rows", b64_json.bytesize) do
  Densewire::JSONEnvelope.encode(tensor, encoding_format: "base64")
end
row.call("densewire Tensor.from_values (Floats -> float32 bytes) + Raw.encode", raw_body.bytesize) do
  Densewire::Raw.encode(Densewire::Tensor.from_values(floats))
end

group = "HTTP round trip over loopback (in-process TCPServer, body prebuilt; client keep-alive)"
server = TinyHTTPServer.new do |req|
  case req.path
  when "/json-floats/v1/embeddings" then [200, { "Content-Type" => "application/json" }, python_json]
  else
    case Densewire::Media.negotiate(req.headers["accept"])
    when :raw then [200, raw_headers.merge("Content-Type" => Densewire::Media::RAW), raw_body]
    when :msgpack then [200, { "Content-Type" => Densewire::Media::MSGPACK }, msgpack_body]
    else [200, { "Content-Type" => "application/json" }, b64_json]
    end
  end
end
input = Array.new(N) { |i| "text #{i}" }
clients = {
  floats: Densewire::Client.new(base_url: "#{server.url}/json-floats", formats: [:json]),
  b64: Densewire::Client.new(base_url: server.url, formats: [:json]),
  msgpack: Densewire::Client.new(base_url: server.url, formats: [:msgpack]),
  raw: Densewire::Client.new(base_url: server.url),
}
clients.each_value { |c| c.embed(["warm up"]) }
row.call("client, server answers JSON float arrays -> Floats", python_json.bytesize) { check_rows(clients[:floats].embed(input), floats) }
row.call("client, JSON with Base64 rows -> Floats", b64_json.bytesize) { check_rows(clients[:b64].embed(input), floats) }
row.call("client, MessagePack -> Floats", msgpack_body.bytesize) { check_rows(clients[:msgpack].embed(input), floats) }
row.call("client, raw -> Floats", raw_body.bytesize) { check_rows(clients[:raw].embed(input), floats) }
row.call("client, raw -> packed String rows", raw_body.bytesize) { clients[:raw].embed(input, packed: true) }

loadavg = -> { File.read("/proc/loadavg").split[0, 3].join(" ") rescue "n/a" }
puts "densewire Ruby bench: #{N} x #{D} float32, #{ROUNDS} rounds, #{RUBY_DESCRIPTION}, json #{JSON::VERSION}"
puts "load average at start: #{loadavg.call}"
ROUNDS.times do |r|
  CASES.each do |c|
    GC.start
    c0 = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)
    t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    result = c[:blk].call
    c[:times] << (Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0) * 1000.0
    c[:cpu] << (Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID) - c0) * 1000.0
    raise "#{c[:name]}: no result" if result.nil?
  end
  $stderr.puts "round #{r + 1}/#{ROUNDS} done"
end
clients.each_value(&:close)
server.stop
puts "load average at end: #{loadavg.call}"

CASES.each do |c|
  t = c[:times].sort
  c[:min] = t.first
  c[:median] = t[t.size / 2]
  c[:cpu_min] = c[:cpu].min
end
base = CASES.first
last_group = nil
puts
puts "| case | body bytes | wall min ms | wall median ms | CPU min ms | speed-up vs baseline: wall min / wall median / CPU min |"
puts "|---|---:|---:|---:|---:|---:|"
CASES.each do |c|
  if c[:group] != last_group
    puts "| **#{c[:group]}** | | | | | |"
    last_group = c[:group]
  end
  puts format("| %s | %d | %.1f | %.1f | %.1f | %.1fx / %.1fx / %.1fx |", c[:name], c[:bytes], c[:min], c[:median],
              c[:cpu_min], base[:min] / c[:min], base[:median] / c[:median], base[:cpu_min] / c[:cpu_min])
end
