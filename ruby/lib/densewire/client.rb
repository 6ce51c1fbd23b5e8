# frozen_string_literal: true

require "json"
require "net/http"
require "uri"

module Densewire
  # A client for POST /v1/embeddings (SPEC.md sections 6 and 12) over Net::HTTP: it asks for the
  # raw body first, then MessagePack (when the msgpack gem is there), then JSON with Base64 rows, so
  # a densewire server answers in binary and an OpenAI-compatible one still works. One persistent
  # connection is kept alive and reused; requests from several threads take turns on it.
  #
  #   client = Densewire::Client.new(base_url: "http://embedder:8000")
  #   client.embed(["hello", "world"])               # => [[0.01, ...], [...]] (Floats)
  #   client.embed(["hello"], packed: true)          # => ["\x..."] little-endian bytes per row
  class Client
    DEFAULT_FORMATS = %i[raw msgpack json].freeze
    RETRYABLE = [EOFError, Errno::ECONNRESET, Errno::EPIPE, Errno::ECONNABORTED, IOError].freeze

    attr_reader :base_url, :formats, :accept

    # +base_url+: the server, with or without the /v1 suffix (http://host:8000 or https://api.openai.com/v1).
    # +api_key+: sent as a Bearer token. +model+: default model. +formats+: the formats to accept, in
    # order of preference, among :raw, :msgpack, :protobuf, :arrow, :json. +compress+: also accept gzip
    # (worth it for JSON over slow links; binary embeddings hardly compress).
    def initialize(base_url: ENV.fetch("DENSEWIRE_URL", "http://localhost:8000"), api_key: ENV["DENSEWIRE_API_KEY"],
                   model: nil, formats: nil, compress: false, open_timeout: 10, read_timeout: 120,
                   keep_alive_timeout: 4, headers: {})
      @base_url = base_url.to_s.chomp("/")
      uri = URI.parse(@base_url)
      raise ArgumentError, "base_url must be http or https: #{base_url.inspect}" unless uri.is_a?(URI::HTTP)

      @uri = uri
      @path = "#{uri.path.chomp("/")}#{uri.path.end_with?("/v1") ? "" : "/v1"}/embeddings"
      @api_key = api_key
      @model = model
      @formats = (formats || default_formats).map(&:to_sym)
      unknown = @formats - %i[raw msgpack protobuf arrow json]
      raise ArgumentError, "unknown formats #{unknown.inspect}" unless unknown.empty?

      @accept = @formats.each_with_index.map { |f, i| i.zero? ? Media::TYPES[f] : "#{Media::TYPES[f]};q=#{format("%.1f", 1 - i * 0.1)}" }.join(", ")
      @compress = compress
      @open_timeout = open_timeout
      @read_timeout = read_timeout
      @keep_alive_timeout = keep_alive_timeout
      @headers = headers
      @http = nil
      @mutex = Mutex.new
    end

    # Opens a client, yields it and closes it.
    def self.open(**options)
      client = new(**options)
      return client unless block_given?

      begin
        yield client
      ensure
        client.close
      end
    end

    # Embeds +input+ (a String or an Array of Strings) and returns one row per input: Arrays of
    # Floats (Integers for int8/uint8, packed bytes for binary), or, with +packed: true+, each row's
    # little-endian bytes as a binary String, with no Ruby number made per item.
    def embed(input, packed: false, **options)
      result = create_embeddings(input: input, **options)
      packed ? result.packed_rows : result.to_a
    end

    # The full response as Embeddings (tensor, model, usage). Options are the request fields of
    # SPEC.md section 6.1: model, dimensions, dtype, byteorder, user, truncate.
    def create_embeddings(input:, model: nil, dimensions: nil, dtype: nil, byteorder: nil, user: nil, truncate: nil)
      body = { "input" => input, "encoding_format" => "base64" }
      model ||= @model
      body["model"] = model if model
      body["dimensions"] = dimensions if dimensions
      # Sent only when asked for, so that OpenAI itself (which rejects unknown fields) stays usable.
      body["dtype"] = Dtype.check!(dtype) if dtype
      body["byteorder"] = Dtype.check_byteorder!(byteorder) if byteorder
      body["user"] = user if user
      body["truncate"] = truncate unless truncate.nil?
      post(@path, JSON.generate(body))
    end
    alias embeddings create_embeddings

    # Closes the kept-alive connection (a later request opens a new one).
    def close
      @mutex.synchronize { disconnect }
    end

    private

    def default_formats
      Msgpack.library
      DEFAULT_FORMATS
    rescue LoadError
      DEFAULT_FORMATS - [:msgpack]
    end

    def post(path, json)
      request = Net::HTTP::Post.new(path)
      request["Content-Type"] = "application/json"
      request["Accept"] = @accept
      request["Accept-Encoding"] = @compress ? "gzip, identity;q=0.5" : "identity"
      request["User-Agent"] = "densewire-ruby/#{VERSION}"
      request["Authorization"] = "Bearer #{@api_key}" if @api_key
      @headers.each { |k, v| request[k] = v }
      request.body = json
      response = @mutex.synchronize { perform(request) }
      handle(response)
    end

    def perform(request)
      attempts = 0
      begin
        reused = !@http.nil?
        http = connection
        response = http.request(request)
        disconnect if response["Connection"].to_s.downcase == "close"
        response
      rescue *RETRYABLE
        disconnect
        attempts += 1
        # A kept-alive connection the server has closed fails on first use: retry once on a fresh one.
        retry if reused && attempts == 1
        raise
      rescue StandardError
        disconnect
        raise
      end
    end

    def connection
      return @http if @http&.started?

      http = Net::HTTP.new(@uri.host, @uri.port)
      http.use_ssl = @uri.scheme == "https"
      http.open_timeout = @open_timeout
      http.read_timeout = @read_timeout
      http.keep_alive_timeout = @keep_alive_timeout
      http.start
      @http = http
    end

    def disconnect
      @http&.finish if @http&.started?
    rescue IOError
      nil
    ensure
      @http = nil
    end

    def handle(response)
      status = response.code.to_i
      raise http_error(response, status) unless status.between?(200, 299)

      Media.decode_response(response.body.to_s, content_type: response["Content-Type"], headers: response,
                                                content_encoding: response["Content-Encoding"])
    end

    def http_error(response, status)
      body = Media.inflate(response.body.to_s, response["Content-Encoding"])
      error = JSON.parse(body)["error"] if response["Content-Type"].to_s.include?("json")
      if error.is_a?(Hash)
        HTTPError.new(status: status, code: error["code"], param: error["param"], message: error["message"],
                      offset: error["offset"], type: error["type"], body: body)
      else
        code = CATEGORY_CLASSES.find { |_, k| k::HTTP_STATUS == status }&.first
        HTTPError.new(status: status, code: code, message: body.to_s[0, 200], body: body)
      end
    rescue JSON::ParserError, Densewire::Error
      HTTPError.new(status: status, message: response.body.to_s[0, 200], body: response.body)
    end
  end
end
