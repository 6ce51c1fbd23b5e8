# frozen_string_literal: true

require_relative "tiny_http_server"
require_relative "fake_tables"

# An in-process stand-in for `densewire serve` (SPEC.md sections 6 and 12): POST /v1/embeddings
# answers, in the format negotiated from Accept (or ?format=), with the golden bodies of the
# envelope cases ("with_model_and_usage" for float32, "binary_with_usage" for dtype binary), with
# the headers the spec gives; errors are OpenAI envelopes. GET /v1/tables[/NAME] serve the golden
# tables (FakeTables). dtype int8/uint8 quantizes the float32 rows with fixed ranges (QUANTIZATION),
# whose object GET /v1/quantization/ID answers (+quantization_requests+ counts them). +faults+ answer
# the next requests instead, one each, in order: 429 or 503 (with +retry_after+ as Retry-After), 400,
# :close (the connection closed before any answer), or :ok (passed on).
class FakeEmbeddingsServer
  CASES = {
    "float32" => "with_model_and_usage",
    "binary" => "binary_with_usage",
  }.freeze

  # Ranges of the 3 dimensions of the float32 golden rows ([1, -2.5, 0.1], [3, 0.5, -1]): the second
  # row's 3 is above its upper bound and is clamped.
  QUANTIZATION = Densewire::Quantization.new(lower: [-1.0, -2.5, -1.0], upper: [2.0, 0.5, 0.25])

  attr_reader :http, :quantization_requests
  attr_accessor :faults, :retry_after

  def initialize(api_key: nil, gzip: false)
    @api_key = api_key
    @gzip = gzip
    @golden = GoldenFiles.cases("tensors").to_h { |c| [c["id"], c] }
    @tables = FakeTables.new
    @faults = []
    @quantization_requests = []
    @retry_after = "0"
    @http = TinyHTTPServer.new { |req| fault(req) || handle(req) }
  end

  def url
    @http.url
  end

  def stop
    @http.stop
  end

  def golden(format, dtype)
    tag = { "float32" => "f32", "binary" => "bin" }.fetch(dtype)
    id = format == "json" ? "json.base64.#{tag}#{dtype == "binary" ? "" : "le"}.#{CASES[dtype]}" : "#{format}.#{tag}.#{CASES[dtype]}"
    @golden.fetch(id)
  end

  private

  def fault(_req)
    case (f = @faults.shift)
    when nil, :ok then nil
    when :close then :close
    else
      status, headers, body = error(f, { 429 => "rate_limited", 503 => "unavailable", 400 => "malformed" }.fetch(f), "injected #{f}")
      headers = headers.merge("Connection" => "close") # the next attempt on a fresh connection
      headers = headers.merge("Retry-After" => @retry_after) if @retry_after
      [status, headers, body]
    end
  end

  def error(status, code, message, param = nil, offset = nil)
    body = JSON.generate({ "error" => { "message" => message, "type" => status >= 500 ? "server_error" : "invalid_request_error",
                                        "param" => param, "code" => code, "offset" => offset } })
    [status, { "Content-Type" => "application/json" }, body]
  end

  def handle(req)
    path, query = req.path.split("?", 2)
    if @api_key && path.start_with?("/v1/tables") && req.headers["authorization"] != "Bearer #{@api_key}"
      return error(401, "unauthorized", "missing or wrong API key")
    end

    tables = @tables.handle(req, method(:error))
    return tables if tables

    if req.method == "GET" && path.start_with?("/v1/quantization/")
      id = path.delete_prefix("/v1/quantization/")
      @quantization_requests << id
      return error(404, "not_found", "no quantization #{id}") unless id == QUANTIZATION.id

      return [200, { "Content-Type" => "application/json", "Cache-Control" => "public, max-age=31536000, immutable" },
              JSON.generate(QUANTIZATION.to_h)]
    end

    return error(404, "not_found", "no route #{path}") unless req.method == "POST" && path == "/v1/embeddings"
    return error(401, "unauthorized", "missing or wrong API key") if @api_key && req.headers["authorization"] != "Bearer #{@api_key}"

    begin
      body = JSON.parse(req.body)
    rescue JSON::ParserError
      return error(400, "malformed", "request body is not JSON")
    end
    unknown = body.keys - %w[input model encoding_format dimensions user dtype byteorder truncate]
    return error(422, "invalid_field", "unknown field #{unknown.first}", unknown.first) unless unknown.empty?

    dtype = body.fetch("dtype", "float32")
    quantized = Densewire::Quantization::DTYPES.include?(dtype)
    return error(422, "invalid_field", "this server has float32, binary, int8 and uint8 only", "dtype") unless CASES.key?(dtype) || quantized
    return error(503, "unavailable", "model warming up") if body["input"] == ["unavailable"]

    fmt = begin
      Densewire::Media.negotiate(req.headers["accept"], format: query&.then { |q| q[/format=(\w+)/, 1] })
    rescue Densewire::NotAcceptableError => e
      return error(406, "not_acceptable", e.message)
    end
    headers = { "Content-Type" => Densewire::Media::TYPES[fmt], "Vary" => "Accept, Accept-Encoding" }
    if quantized
      _, extra, out = Densewire::Media.encode_response(quantized_response(dtype), fmt)
      headers.merge!(extra)
    else
      c = golden(fmt.to_s, dtype)
      out = c["encoded_hex"] ? [c["encoded_hex"]].pack("H*") : c["encoded_text"]
      headers.merge!(c["headers"]) if fmt == :raw
    end
    if @gzip && req.headers["accept-encoding"].to_s.include?("gzip")
      out = Zlib.gzip(out)
      headers["Content-Encoding"] = "gzip"
    end
    [200, headers, out]
  end

  # The float32 golden response's rows quantized to +dtype+, with its model, usage and the id.
  def quantized_response(dtype)
    floats = Densewire::Media.decode_response([golden("protobuf", "float32")["encoded_hex"]].pack("H*"),
                                              content_type: Densewire::Media::TYPES[:protobuf])
    codes = QUANTIZATION.quantize(floats.tensor, dtype: dtype)
    Densewire::Embeddings.new(codes, model: floats.model, usage: floats.usage, quantization: QUANTIZATION.id)
  end
end
