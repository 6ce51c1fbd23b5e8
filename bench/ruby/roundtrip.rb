# frozen_string_literal: true

# The published case's round trip against the real server: a Ruby client asks `densewire serve` for
# 1,000 embeddings of 1,536 float32 and gets arrays of Ruby Floats, once per response format:
#
# - JSON float arrays (encoding_format "float"), read the way the Rails app did: Net::HTTP +
#   JSON.parse, rows taken from data[i].embedding. This is the baseline. densewire serve writes the
#   shortest decimal of each float32 (19 MB for this case).
# - The same request to bench/ruby/python_service.py (when PYTHON_SERVICE_URL is set): the published
#   case's Python service, json.dumps of ndarray.tolist(), float64 digits of each float32 (33 MB).
# - JSON with Base64 rows, MessagePack and raw, through Densewire::Client (Net::HTTP underneath).
# - raw to packed Strings (no Ruby Float made), for callers that pass the vectors on.
#
# Every request embeds the same 1,000 texts in one call (the server's --max-client-batch-size is
# 2,048 by default). All connections are kept alive and send Accept-Encoding: identity. Each round
# runs every case once, so load drift hits all of them alike.
#
#   bash bench/ruby/roundtrip.sh [N_INPUTS] [ROUNDS]      (starts and stops the server)
#   [PYTHON_SERVICE_URL=http://...] ruby bench/ruby/roundtrip.rb URL [N_INPUTS] [ROUNDS]
#                                                         (against servers already running)

$LOAD_PATH.unshift(File.expand_path("../../ruby/lib", __dir__))
require "densewire"
require "json"
require "net/http"
require "uri"

URL = ARGV[0] or abort("usage: ruby bench/ruby/roundtrip.rb URL [N_INPUTS] [ROUNDS]")
N = Integer(ARGV[1] || 1000)
ROUNDS = Integer(ARGV[2] || 7)

uri = URI.parse(URL)
INPUT = Array.new(N) { |i| "document #{i}: a paragraph of a support ticket about invoice #{1000 + i} and its refund" }
MODEL = JSON.parse(Net::HTTP.get(URI.join(URL, "/v1/models")))["data"][0]["id"]

# The baseline client: what an app without densewire writes.
plain = Net::HTTP.new(uri.host, uri.port)
plain.read_timeout = 300
plain.start
float_request_body = JSON.generate({ "input" => INPUT, "model" => MODEL, "encoding_format" => "float" })
last_float_bytes = {}
json_floats = lambda do |http = plain|
  req = Net::HTTP::Post.new("/v1/embeddings", "Content-Type" => "application/json", "Accept" => "application/json",
                                              "Accept-Encoding" => "identity")
  req.body = float_request_body
  res = http.request(req)
  raise "HTTP #{res.code}: #{res.body[0, 200]}" unless res.code == "200"

  last_float_bytes[http] = res.body.bytesize
  JSON.parse(res.body)["data"].map { |e| e["embedding"] }
end
python = nil
if (py_url = ENV["PYTHON_SERVICE_URL"])
  py_uri = URI.parse(py_url)
  python = Net::HTTP.new(py_uri.host, py_uri.port)
  python.read_timeout = 300
  python.start
end

clients = {
  b64: Densewire::Client.new(base_url: URL, model: MODEL, formats: [:json], read_timeout: 300),
  msgpack: Densewire::Client.new(base_url: URL, model: MODEL, formats: [:msgpack], read_timeout: 300),
  raw: Densewire::Client.new(base_url: URL, model: MODEL, formats: [:raw], read_timeout: 300),
}

# Response sizes and a check that every format gives the same vectors (the float JSON carries the
# shortest decimals of each float32, so its Floats are the same float32 values).
reference = clients[:raw].embed(INPUT)
raise "expected #{N} x 1536, got #{reference.size} x #{reference[0]&.size}" unless reference.size == N

sizes = {}
{ b64: "application/json", msgpack: Densewire::Media::MSGPACK, raw: Densewire::Media::RAW }.each do |k, accept|
  req = Net::HTTP::Post.new("/v1/embeddings", "Content-Type" => "application/json", "Accept" => accept,
                                              "Accept-Encoding" => "identity")
  req.body = JSON.generate({ "input" => INPUT, "model" => MODEL, "encoding_format" => "base64" })
  res = plain.request(req)
  sizes[k] = res.body.bytesize
end
floats_from_json = json_floats.call
sizes[:floats] = last_float_bytes[plain]
same = floats_from_json.each_with_index.all? { |r, i| r.pack("e*") == reference[i].pack("e*") }
raise "JSON float arrays differ from the raw body's vectors" unless same
if python
  floats_from_python = json_floats.call(python)
  sizes[:python] = last_float_bytes[python]
  raise "the Python service's vectors differ" unless floats_from_python == reference
end
raise "Base64 JSON differs" unless clients[:b64].embed(INPUT) == reference
raise "MessagePack differs" unless clients[:msgpack].embed(INPUT) == reference

CASES = [
  ["JSON float arrays: Net::HTTP + JSON.parse  [baseline]", :floats, json_floats],
  ["JSON with Base64 rows: Densewire::Client -> Floats", :b64, -> { clients[:b64].embed(INPUT) }],
  ["MessagePack: Densewire::Client -> Floats", :msgpack, -> { clients[:msgpack].embed(INPUT) }],
  ["raw: Densewire::Client -> Floats", :raw, -> { clients[:raw].embed(INPUT) }],
  ["raw: Densewire::Client -> packed String rows", :raw, -> { clients[:raw].embed(INPUT, packed: true) }],
].map { |name, fmt, blk| { name: name, fmt: fmt, blk: blk, wall: [], cpu: [] } }
if python
  CASES.insert(1, { name: "published case: Python service, json.dumps(tolist()) float64 digits: Net::HTTP + JSON.parse",
                    fmt: :python, blk: -> { json_floats.call(python) }, wall: [], cpu: [] })
end

loadavg = -> { File.read("/proc/loadavg").split[0, 3].join(" ") rescue "n/a" }
puts "densewire Ruby round trip: #{N} inputs -> #{N} x 1536 float32 from #{URL} (model #{MODEL}), #{ROUNDS} rounds"
puts "#{RUBY_DESCRIPTION}, json #{JSON::VERSION}"
puts "load average at start: #{loadavg.call}"
ROUNDS.times do |r|
  CASES.each do |c|
    GC.start
    c0 = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)
    t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    rows = c[:blk].call
    c[:wall] << (Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0) * 1000.0
    c[:cpu] << (Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID) - c0) * 1000.0
    raise "#{c[:name]}: #{rows.size} rows" unless rows.size == N
  end
  $stderr.puts "round #{r + 1}/#{ROUNDS} done"
end
puts "load average at end: #{loadavg.call}"
plain.finish
python&.finish
clients.each_value(&:close)

med = ->(a) { a.sort[a.size / 2] }
base = CASES.first
py = CASES.find { |c| c[:fmt] == :python }
puts
puts "| format and client | response bytes | round trip min ms | round trip median ms | client CPU min ms | client CPU median ms | " \
     "speed-up vs densewire serve JSON floats: min / median#{py ? " | speed-up vs Python service: min / median" : ""} |"
puts "|---|---:|---:|---:|---:|---:|---:|#{py ? "---:|" : ""}"
CASES.each do |c|
  line = format("| %s | %d | %.1f | %.1f | %.1f | %.1f | %.1fx / %.1fx |", c[:name], sizes[c[:fmt]], c[:wall].min, med.(c[:wall]),
                c[:cpu].min, med.(c[:cpu]), base[:wall].min / c[:wall].min, med.(base[:wall]) / med.(c[:wall]))
  line += format(" %.1fx / %.1fx |", py[:wall].min / c[:wall].min, med.(py[:wall]) / med.(c[:wall])) if py
  puts line
end
