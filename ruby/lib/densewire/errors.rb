# frozen_string_literal: true

module Densewire
  # Base class of every error densewire raises (SPEC.md section 11). Each subclass stands for one
  # category; every error carries where it happened: +offset+ (characters of a Base64 string, bytes of
  # a binary body) and/or +field+ (a JSON path such as "data[3].embedding", a MessagePack/Protobuf
  # field name, or an HTTP header name). Either may be nil.
  class Error < StandardError
    attr_reader :offset, :field, :detail

    class << self
      # The category string of this class ("invalid_base64", ...).
      def category
        self::CATEGORY
      end

      # The HTTP status SPEC.md gives this category.
      def http_status
        self::HTTP_STATUS
      end

      # The error class for a category string, or nil.
      def for_category(category)
        CATEGORY_CLASSES[category.to_s]
      end
    end

    # +detail+ says what was wrong; the message prefixes the field, as in SPEC.md's example
    # "data[1].embedding: invalid Base64 character '*' at offset 4".
    def initialize(detail = nil, offset: nil, field: nil)
      @detail = detail || self.class.name
      @offset = offset
      @field = field
      super(field ? "#{field}: #{@detail}" : @detail)
    end

    def category
      self.class.category
    end

    def http_status
      self.class.http_status
    end

    # The OpenAI-style error envelope a server answers with (SPEC.md section 11).
    def to_h
      { "error" => { "message" => message, "type" => http_status >= 500 ? "server_error" : "invalid_request_error",
                     "param" => field, "code" => category, "offset" => offset } }
    end
  end

  CATEGORY_CLASSES = {}

  {
    "InvalidBase64Error" => ["invalid_base64", 400],
    "LengthMismatchError" => ["length_mismatch", 400],
    "ShapeMismatchError" => ["shape_mismatch", 400],
    "UnknownDtypeError" => ["unknown_dtype", 400],
    "TruncatedError" => ["truncated", 400],
    "MalformedError" => ["malformed", 400],
    "InvalidFieldError" => ["invalid_field", 422],
    "NonFiniteError" => ["non_finite", 422],
    "UnauthorizedError" => ["unauthorized", 401],
    "NotFoundError" => ["not_found", 404],
    "PayloadTooLargeError" => ["payload_too_large", 413],
    "UnsupportedMediaTypeError" => ["unsupported_media_type", 415],
    "NotAcceptableError" => ["not_acceptable", 406],
    "UnavailableError" => ["unavailable", 503],
  }.each do |name, (category, status)|
    klass = Class.new(Error)
    klass.const_set(:CATEGORY, category)
    klass.const_set(:HTTP_STATUS, status)
    const_set(name, klass)
    CATEGORY_CLASSES[category] = klass
  end
  CATEGORY_CLASSES.freeze

  # "(3 attempts)", said by the error after the client's last attempt.
  def self.attempts_text(attempts)
    attempts.to_i.positive? ? " (#{attempts} attempt#{attempts == 1 ? "" : "s"})" : ""
  end

  # An error answer from an embeddings server: the HTTP +status+ and the OpenAI envelope's +code+
  # (the category), +param+ (the field), +message+ and densewire's +offset+; +attempts+ is how many
  # times the client sent the request (retries included). A 429 is a RateLimitedError. A connection
  # that kept failing is a ConnectionError; read timeouts stay Net::ReadTimeout.
  class HTTPError < Error
    attr_reader :status, :code, :param, :type, :body, :server_message, :attempts, :retry_after

    # The class for a status: RateLimitedError for 429, else HTTPError.
    def self.for_status(status)
      Integer(status) == 429 ? RateLimitedError : HTTPError
    end

    # +retry_after+: the answer's Retry-After in seconds (nil without one); after a 429 or 503 that
    # was not retried because it asked for more than a minute (Retry::MAX_RETRY_AFTER), when to come back.
    def initialize(status:, code: nil, param: nil, message: nil, offset: nil, type: nil, body: nil, attempts: nil,
                   retry_after: nil)
      @status = Integer(status)
      @retry_after = retry_after
      @code = code
      @param = param
      @type = type
      @body = body
      @server_message = message
      @attempts = attempts
      later = retry_after && retry_after > Retry::MAX_RETRY_AFTER ? " (the server asks to come back in #{retry_after} s)" : ""
      super("HTTP #{@status}#{code ? " #{code}" : ""}: #{message || "(no message)"}#{Densewire.attempts_text(attempts)}#{later}",
            offset: offset)
      @field = param
    end

    # The category is the server's error code.
    def category
      code
    end

    def http_status
      status
    end
  end

  # A 429 answer after every retry: the server's admission is full (densewire serve
  # --max-concurrent-requests).
  class RateLimitedError < HTTPError
    CATEGORY = "rate_limited"
    HTTP_STATUS = 429
  end

  # The connection failed before any answer came back (refused, reset, closed) on every attempt;
  # +cause+ is the last failure, +attempts+ how many were made.
  class ConnectionError < UnavailableError
    attr_reader :attempts

    def initialize(detail, attempts:)
      @attempts = attempts
      super("#{detail}#{Densewire.attempts_text(attempts)}")
    end
  end
end
