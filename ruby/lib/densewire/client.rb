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
  # A 429, a 503 or a connection that failed before any answer is retried (Densewire::Retry): twice
  # by default, with full-jitter backoff on top of the server's Retry-After; the error after the last
  # attempt (RateLimitedError, HTTPError, ConnectionError) says how many attempts were made.
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
    # (worth it for JSON over slow links; binary embeddings hardly compress). +max_retries+ (2; 0
    # never retries), +retry_base_delay+ (0.5 s), +retry_max_delay+ (8 s) and +retry_random+ (the
    # source of the backoff's draws, anything whose +rand+ is uniform in [0, 1): Random.new(seed) for a
    # reproducible schedule): see Densewire::Retry (SPEC.md section 18).
    def initialize(base_url: ENV.fetch("DENSEWIRE_URL", "http://localhost:8000"), api_key: ENV["DENSEWIRE_API_KEY"],
                   model: nil, formats: nil, compress: false, open_timeout: 10, read_timeout: 120,
                   keep_alive_timeout: 4, headers: {}, max_retries: 2, retry_base_delay: 0.5, retry_max_delay: 8.0,
                   retry_random: Random.new)
      @base_url = base_url.to_s.chomp("/")
      uri = URI.parse(@base_url)
      raise ArgumentError, "base_url must be http or https: #{base_url.inspect}" unless uri.is_a?(URI::HTTP)

      @uri = uri
      @prefix = "#{uri.path.chomp("/")}#{uri.path.chomp("/").end_with?("/v1") ? "" : "/v1"}"
      @path = "#{@prefix}/embeddings"
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
      @retry = Retry.new(max_retries: max_retries, base_delay: retry_base_delay, max_delay: retry_max_delay,
                         random: retry_random)
      @http = nil
      @mutex = Mutex.new
      @quantizations = {}
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

    # The full response as Embeddings (tensor, model, usage, quantization). Options are the request
    # fields of SPEC.md section 6.1: model, dimensions, dtype, byteorder, user, truncate; and
    # +max_retries+, the client's for this call. +dequantize: true+ with dtype "int8" or "uint8"
    # turns the codes back into float32 with the ranges the response's quantization id names
    # (+quantization+: fetched once per id): a quarter of the bytes on the wire, float32 in hand.
    def create_embeddings(input:, model: nil, dimensions: nil, dtype: nil, byteorder: nil, user: nil, truncate: nil,
                          max_retries: nil, dequantize: false)
      if dequantize && !Quantization::DTYPES.include?(dtype.to_s)
        raise ArgumentError, "dequantize needs dtype \"int8\" or \"uint8\", got #{(dtype || "float32").inspect}"
      end

      body = { "input" => input, "encoding_format" => "base64" }
      model ||= @model
      body["model"] = model if model
      body["dimensions"] = dimensions if dimensions
      # Sent only when asked for, so that OpenAI itself (which rejects unknown fields) stays usable.
      body["dtype"] = Dtype.check!(dtype) if dtype
      body["byteorder"] = Dtype.check_byteorder!(byteorder) if byteorder
      body["user"] = user if user
      body["truncate"] = truncate unless truncate.nil?
      result = post(@path, JSON.generate(body), max_retries)
      dequantize ? dequantize_response(result, dtype, max_retries) : result
    end
    alias embeddings create_embeddings

    # Per-token embeddings (TEI's POST /embed_all, which densewire serve answers beside /v1): one
    # tokens x d matrix per text, special tokens included, as a Densewire::RaggedTensor over one rows
    # String (+matrix(i)+). Asked for in the client's formats (densewire's ragged raw body first);
    # TEI's own JSON ([[[f32]]]) is read too. +truncate+ cuts texts longer than the model's maximum
    # (the server's --auto-truncate when nil).
    def embed_tokens(input, truncate: nil, max_retries: nil)
      texts = input.is_a?(String) ? [input] : input.to_a
      raise ArgumentError, "embed_tokens needs at least one text" if texts.empty?

      body = { "inputs" => texts }
      body["truncate"] = truncate unless truncate.nil?
      response, attempts = send_post("#{@prefix.delete_suffix("/v1")}/embed_all", JSON.generate(body), max_retries)
      status = response.code.to_i
      raise http_error(response, status, attempts) unless status.between?(200, 299)

      t = decode_tokens(response)
      raise ShapeMismatchError.new("the server returned #{t.shape[0]} matrices for #{texts.size} inputs", field: "data") unless t.shape[0] == texts.size

      t
    end

    # Sparse (SPLADE) vectors (TEI's POST /embed_sparse, which densewire serve answers beside /v1): per
    # text its non-zero vocabulary weights, as a Densewire::SparseTensor whose indices (Integers) and
    # values (one float32 String) hold every text's, split by +offsets+ (+vector(i)+). Asked for in the
    # client's formats (densewire's sparse raw body first); TEI's own JSON ([[{"index", "value"}]]) is
    # read too, with +vocab_size+ as its vocabulary size (TEI sends none; one past the largest index when
    # nil). +truncate+ cuts texts longer than the model's maximum (the server's --auto-truncate when nil);
    # +truncation_direction+ ("Left" or "Right") and +prompt_name+ are TEI's; +max_active_dims+ keeps each
    # vector's k largest weights (densewire serve).
    def embed_sparse(input, truncate: nil, truncation_direction: nil, prompt_name: nil, max_active_dims: nil, vocab_size: nil,
                     max_retries: nil)
      texts = input.is_a?(String) ? [input] : input.to_a
      raise ArgumentError, "embed_sparse needs at least one text" if texts.empty?

      body = { "inputs" => texts }
      body["truncate"] = truncate unless truncate.nil?
      body["truncation_direction"] = truncation_direction if truncation_direction
      body["prompt_name"] = prompt_name if prompt_name
      body["max_active_dims"] = max_active_dims if max_active_dims
      response, attempts = send_post("#{@prefix.delete_suffix("/v1")}/embed_sparse", JSON.generate(body), max_retries)
      status = response.code.to_i
      raise http_error(response, status, attempts) unless status.between?(200, 299)

      t = decode_sparse(response, vocab_size)
      raise ShapeMismatchError.new("the server returned #{t.shape[0]} vectors for #{texts.size} inputs", field: "data") unless t.shape[0] == texts.size

      t
    end

    # The quantization ranges a server publishes at GET /v1/quantization/ID, as a Densewire::Quantization
    # checked against its id. The object is immutable: it is fetched once per id and kept for the
    # client's lifetime (a failed fetch is not kept).
    def quantization(id, max_retries: nil)
      @mutex.synchronize { cached = @quantizations[id] and return cached }
      response = get("#{@prefix}/quantization/#{Table.percent_encode(id.to_s)}", "application/json", max_retries: max_retries)
      q = Quantization.from_object(Media.inflate(response.body.to_s, response["Content-Encoding"]))
      raise InvalidFieldError.new("asked for quantization #{id}, the server answered #{q.id}", field: "quantization.id") unless q.id == id

      @mutex.synchronize { @quantizations[id] = q }
    end

    # ---------------------------------------------------------------- tables (SPEC.md section 15)
    # One entry of GET /v1/tables: +columns+ are Table::Fields; +version+ changes when the data does.
    TableInfo = Struct.new(:name, :rows, :columns, :version, :refreshed_at, :formats, keyword_init: true)

    # The tables the server has (GET /v1/tables), as TableInfo.
    def list_tables
      response = get("#{@prefix}/tables", "application/json")
      doc = JSONEnvelope.parse(response.body.to_s)
      data = doc.is_a?(Hash) && doc["data"]
      raise InvalidFieldError.new("the table list has no data array", field: "data") unless data.is_a?(Array)

      data.each_with_index.map do |t, i|
        columns = Array(t["columns"]).each_with_index.map do |c, k|
          Table.field_of(c["name"].to_s, c["type"], field: "data[#{i}].columns[#{k}].type")
        end
        TableInfo.new(name: t["name"], rows: t["rows"], columns: columns, version: t["version"],
                      refreshed_at: t["refreshed_at"], formats: t["formats"])
      end
    end

    # Table formats the client asks for by default: MessagePack when the msgpack gem is there, then
    # Protobuf (read without any gem), then the JSON columns layout. MessagePack comes first because
    # densewire's server writes Protobuf columns byte-stream-split, and un-splitting them in Ruby costs
    # more than the whole MessagePack decode (67,627 rows of points: about 60 ms against 190 ms to
    # Ruby values, 0.1 ms against 110 ms packed).
    def table_accept
      types = []
      types << Table::MEDIA_TYPES[:msgpack] if msgpack?
      types << Table::MEDIA_TYPES[:protobuf]
      types << Table::MEDIA_TYPES[:json_columns]
      types.each_with_index.map { |t, i| i.zero? ? t : "#{t};q=#{format("%.1f", 1 - i * 0.1)}" }.join(", ")
    end

    # GET /v1/tables/NAME as a Densewire::Table, with its +etag+, +last_modified+ and +content_type+.
    # +format+: nil (negotiate: MessagePack, else Protobuf, else JSON columns), or one of :protobuf,
    # :msgpack, :arrow, :json (objects), :json_rows, :json_columns, :csv. +packed+: fixed-width
    # columns as little-endian bytes instead of Ruby objects. +if_none_match+: an ETag from an
    # earlier answer; returns nil when the server says 304 Not Modified. +max_retries+: the client's
    # for this call. Bodies come gzip-compressed
    # when the server compresses (Net::HTTP asks for gzip and inflates it).
    def table(name, format: nil, packed: false, if_none_match: nil, max_retries: nil)
      accept = format ? Table::MEDIA_TYPES.fetch(Table.format_key(format)) : table_accept
      extra = if_none_match ? { "If-None-Match" => if_none_match } : {}
      response = get("#{@prefix}/tables/#{Table.percent_encode(name)}", accept, extra, not_modified: true, max_retries: max_retries)
      return nil if response.code == "304"

      content_type = response["Content-Type"]
      body = Media.inflate(response.body.to_s, response["Content-Encoding"])
      fmt = Table.format_of(content_type)
      raise UnsupportedMediaTypeError.new("unexpected Content-Type #{content_type.inspect}", field: "Content-Type") unless fmt

      table = Table.decode(body, format: fmt, headers: response, packed: packed)
      check_headers!(table, response)
      table.etag = response["ETag"]
      table.last_modified = response["Last-Modified"]
      table.content_type = content_type
      table
    end

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

    def post(path, json, max_retries = nil)
      handle(*send_post(path, json, max_retries))
    end

    # A per-token answer: densewire's ragged tensor in any format (SPEC.md 20), or TEI's JSON.
    def decode_tokens(response)
      body = Media.inflate(response.body.to_s, response["Content-Encoding"])
      case Media.format_of(response["Content-Type"])
      when :json then tei_tokens(body)
      when :raw then Kinds.decode_raw(body, response, kind: "ragged")
      when :msgpack then Kinds.decode_msgpack(body, kind: "ragged")
      when :protobuf then Kinds.decode_protobuf(body, kind: "ragged", message: "RaggedEmbeddingsResponse")
      when :arrow then Kinds.decode_arrow(body, kind: "ragged")
      else raise UnsupportedMediaTypeError.new("unexpected Content-Type #{response["Content-Type"].inspect}", field: "Content-Type")
      end
    end

    def tei_tokens(body)
      doc = JSONEnvelope.parse(body)
      raise InvalidFieldError.new("must be an array of matrices", field: "$") unless doc.is_a?(Array) && doc.all?(Array)

      d = doc.find { |m| !m.empty? }&.first&.size || 0
      rows = doc.each_with_index.map do |m, i|
        m.each_with_index.map { |row, r| JSONEnvelope.number_row(row.is_a?(Array) ? row : [row], "float32", d, "[#{i}][#{r}]") }.join
      end
      RaggedTensor.new(rows.join.b, dtype: "float32", d: d, offsets: doc.each_with_object([0]) { |m, o| o << (o[-1] + m.size) })
    end

    def decode_sparse(response, vocab_size)
      body = Media.inflate(response.body.to_s, response["Content-Encoding"])
      case Media.format_of(response["Content-Type"])
      when :json then tei_sparse(body, vocab_size)
      when :raw then Kinds.decode_raw(body, response, kind: "sparse")
      when :msgpack then Kinds.decode_msgpack(body, kind: "sparse")
      when :protobuf then Kinds.decode_protobuf(body, kind: "sparse", message: "SparseEmbeddingsResponse")
      when :arrow then Kinds.decode_arrow(body, kind: "sparse")
      else raise UnsupportedMediaTypeError.new("unexpected Content-Type #{response["Content-Type"].inspect}", field: "Content-Type")
      end
    end

    # TEI's /embed_sparse JSON: per input an array of {"index", "value"}.
    def tei_sparse(body, vocab_size)
      doc = JSONEnvelope.parse(body)
      raise InvalidFieldError.new("must be an array of arrays of {index, value}", field: "$") unless doc.is_a?(Array) && doc.all?(Array)

      indices = []
      values = []
      doc.each_with_index do |v, i|
        v.each_with_index do |e, j|
          index = e.is_a?(Hash) && e["index"]
          raise InvalidFieldError.new("must be an integer from 0 to 2^32 - 1", field: "[#{i}][#{j}].index") unless index.is_a?(Integer) && index.between?(0, 2**32 - 1)

          indices << index
          values << (e["value"].is_a?(Numeric) ? e["value"] : raise(InvalidFieldError.new("must be a number", field: "[#{i}][#{j}].value")))
        end
      end
      SparseTensor.new(values.pack("e*"), dtype: "float32", vocabulary: vocab_size || [(indices.max || -1) + 1, 1].max,
                                          offsets: doc.each_with_object([0]) { |v, o| o << (o[-1] + v.size) }, indices: indices)
    end

    # A JSON POST with the client's headers and retries: [response, attempts].
    def send_post(path, json, max_retries = nil)
      request = Net::HTTP::Post.new(path)
      request["Content-Type"] = "application/json"
      request["Accept"] = @accept
      request["Accept-Encoding"] = @compress ? "gzip, identity;q=0.5" : "identity"
      request["User-Agent"] = "densewire-ruby/#{VERSION}"
      request["Authorization"] = "Bearer #{@api_key}" if @api_key
      @headers.each { |k, v| request[k] = v }
      request.body = json
      send_request(request, max_retries)
    end

    def dequantize_response(result, dtype, max_retries)
      unless result.dtype == dtype.to_s
        raise InvalidFieldError.new("asked for #{dtype} rows to dequantize, the server answered #{result.dtype}", field: "dtype")
      end
      unless result.quantization
        raise InvalidFieldError.new("the server sent #{result.dtype} rows without a quantization id: their ranges are unknown",
                                    field: "quantization")
      end

      q = quantization(result.quantization, max_retries: max_retries)
      unless q.dimensions == result.shape[1]
        raise ShapeMismatchError.new("quantization #{q.id} has #{q.dimensions} dimensions, the rows #{result.shape[1]}", field: "quantization")
      end

      q.dequantize(result)
    end

    def msgpack?
      Msgpack.library
      true
    rescue LoadError
      false
    end

    # A GET; no Accept-Encoding is set, so Net::HTTP asks for gzip and inflates the answer itself.
    def get(path, accept, extra = {}, not_modified: false, max_retries: nil)
      request = Net::HTTP::Get.new(path)
      request["Accept"] = accept
      request["User-Agent"] = "densewire-ruby/#{VERSION}"
      request["Authorization"] = "Bearer #{@api_key}" if @api_key
      @headers.merge(extra).each { |k, v| request[k] = v }
      response, attempts = send_request(request, max_retries)
      status = response.code.to_i
      return response if status.between?(200, 299) || (not_modified && status == 304)

      raise http_error(response, status, attempts)
    end

    # One request with the client's retries (the connection is held only during an attempt, not
    # while waiting): [response, attempts].
    def send_request(request, max_retries)
      policy = max_retries.nil? ? @retry : @retry.with(max_retries: max_retries)
      policy.run("#{request.method} #{request.path}") { @mutex.synchronize { perform(request) } }
    end

    # The Densewire-Rows and Densewire-Columns headers must describe the body that came with them.
    def check_headers!(table, response)
      rows = response["Densewire-Rows"]
      if rows && rows != table.rows.to_s
        raise ShapeMismatchError.new("the body has #{table.rows} rows, the header says #{rows}", field: "Densewire-Rows")
      end

      columns = response[Table::COLUMNS_HEADER]
      return if columns.nil? || Table.parse_columns_header(columns).map(&:to_s) == table.fields.map(&:to_s)

      raise ShapeMismatchError.new("the body's columns #{table.columns_header} differ from the header's", field: Table::COLUMNS_HEADER)
    end

    def perform(request)
      attempts = 0
      begin
        reused = !@http.nil?
        answered = false
        http = connection
        response = http.request(request) { answered = true } # called once the answer's head is read
        disconnect if response["Connection"].to_s.downcase == "close"
        response
      rescue *RETRYABLE => e
        disconnect
        # After the head: the answer broke off, never retried (SPEC.md 18.1).
        raise Retry::AnswerBrokeOff, e.message if answered

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

    def handle(response, attempts)
      status = response.code.to_i
      raise http_error(response, status, attempts) unless status.between?(200, 299)

      Media.decode_response(response.body.to_s, content_type: response["Content-Type"], headers: response,
                                                content_encoding: response["Content-Encoding"])
    end

    def http_error(response, status, attempts)
      klass = HTTPError.for_status(status)
      retry_after = Retry.parse_retry_after(response["Retry-After"])
      body = Media.inflate(response.body.to_s, response["Content-Encoding"])
      error = JSON.parse(body)["error"] if response["Content-Type"].to_s.include?("json") && !body.empty?
      if error.is_a?(Hash)
        klass.new(status: status, code: error["code"], param: error["param"], message: error["message"],
                  offset: error["offset"], type: error["type"], body: body, attempts: attempts, retry_after: retry_after)
      else
        code = status == 429 ? RateLimitedError::CATEGORY : CATEGORY_CLASSES.find { |_, k| k::HTTP_STATUS == status }&.first
        klass.new(status: status, code: code, message: body.to_s[0, 200], body: body, attempts: attempts,
                  retry_after: retry_after)
      end
    rescue JSON::ParserError, Densewire::Error
      klass.new(status: status, message: response.body.to_s[0, 200], body: response.body, attempts: attempts,
                retry_after: retry_after)
    end
  end
end
