# frozen_string_literal: true

require "zlib"

# GET /v1/tables and GET /v1/tables/{name} (SPEC.md section 15.9) for the in-process test servers,
# answering with the golden bodies of testdata/golden/tables.json. A table is served under the NAME
# of its case ids (points, points_f32, all_types, int64_extremes, single, empty, non_finite), with
# the golden Densewire-* headers, Vary, a strong ETag per format and content coding, Last-Modified,
# Cache-Control, 304 for If-None-Match, gzip when the client accepts it, and OpenAI error envelopes.
class FakeTables
  ORDER = %i[json json_rows json_columns csv msgpack protobuf arrow].freeze
  GOLDEN_FORMAT = { "json" => :json, "json-rows" => :json_rows, "json-columns" => :json_columns, "csv" => :csv,
                    "msgpack" => :msgpack, "protobuf" => :protobuf, "arrow" => :arrow }.freeze
  LAST_MODIFIED = "Fri, 21 Nov 2025 12:00:00 GMT"

  attr_reader :tables

  def initialize
    @tables = Hash.new { |h, k| h[k] = {} }
    GoldenFiles.cases("tables").each do |c|
      next if c["id"].start_with?("invalid.")
      next if c["format"] == "protobuf" && c["column_encoding"] != "byte_stream_split" # what densewire serve writes

      key = c["id"].split(".").last
      @tables[key][GOLDEN_FORMAT.fetch(c["format"])] = c
    end
  end

  # The response for +req+ ([status, headers, body]), or nil when the path is not a tables route.
  def handle(req, error)
    path, query = req.path.split("?", 2)
    return nil unless path == "/v1/tables" || path.start_with?("/v1/tables/")
    return error.call(405, "method_not_allowed", "#{req.method} is not allowed here") unless req.method == "GET"
    return [200, { "Content-Type" => "application/json" }, JSON.generate(listing)] if path == "/v1/tables"

    name = path.delete_prefix("/v1/tables/").gsub(/%(\h\h)/) { Regexp.last_match(1).hex.chr }
    formats = @tables[name] if @tables.key?(name)
    return error.call(404, "not_found", "no table #{name.inspect}", "name") unless formats

    fmt = negotiate(req.headers["accept"], query&.then { |q| q[/format=([\w-]+)/, 1] }, formats.keys)
    return error.call(406, "not_acceptable", "no acceptable format; this table has #{formats.keys.join(", ")}") unless fmt

    c = formats[fmt]
    body = c["encoded_hex"] ? [c["encoded_hex"]].pack("H*") : c["encoded_text"].b
    gzip = req.headers["accept-encoding"].to_s.split(",").any? { |e| e.strip.start_with?("gzip") && !e.include?("q=0") }
    etag = %("#{name}-#{fmt}#{gzip ? "-gzip" : ""}")
    headers = c["headers"].merge("Densewire-Version" => "1", "Content-Type" => content_type(fmt),
                                 "Vary" => "Accept, Accept-Encoding", "ETag" => etag,
                                 "Last-Modified" => LAST_MODIFIED, "Cache-Control" => "max-age=60")
    inm = req.headers["if-none-match"]
    if inm && (inm.strip == "*" || inm.split(",").map(&:strip).include?(etag))
      return [304, headers.reject { |k, _| k == "Content-Type" }, ""]
    end

    if gzip
      body = Zlib.gzip(body)
      headers["Content-Encoding"] = "gzip"
    end
    [200, headers, body]
  end

  def listing
    data = @tables.map do |name, formats|
      c = formats.values.first
      { "object" => "table", "name" => name, "rows" => c["rows"],
        "columns" => c["columns"].map { |col| { "name" => col["name"], "type" => col["type"] } },
        "version" => "golden-1", "refreshed_at" => "2025-11-21T12:00:00Z",
        "formats" => ORDER.select { |f| formats.key?(f) }.map { |f| Densewire::Table::FORMAT_PARAMS[f] } }
    end
    { "object" => "list", "data" => data }
  end

  def content_type(fmt)
    fmt == :csv ? "text/csv; charset=utf-8; header=present" : Densewire::Table::MEDIA_TYPES[fmt]
  end

  # RFC 9110 negotiation over the table media types, the server's order at equal q.
  def negotiate(accept, format_param, available)
    if format_param
      fmt = Densewire::Table::FORMAT_PARAMS.key(format_param)
      return available.include?(fmt) ? fmt : nil
    end
    return (available.include?(:json) ? :json : nil) if accept.to_s.strip.empty?

    ranges = Densewire::Media.parse_accept(accept)
    best = nil
    best_q = 0.0
    ORDER.each do |fmt|
      next unless available.include?(fmt)

      names = [Densewire::Table::MEDIA_TYPES[fmt]] + Densewire::Table::MEDIA_ALIASES.select { |_, f| f == fmt }.keys
      spec = -1
      q = 0.0
      ranges.each do |type, subtype, range_q|
        s = if type == "*" && subtype == "*" then 0
            elsif subtype == "*" && names.any? { |n| n.start_with?("#{type}/") } then 1
            elsif names.include?("#{type}/#{subtype}") then 2
            end
        next if s.nil? || s < spec

        spec = s
        q = range_q
      end
      if q > best_q
        best = fmt
        best_q = q
      end
    end
    best
  end
end
