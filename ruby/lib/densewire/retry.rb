# frozen_string_literal: true

require "net/http"
require "time"

module Densewire
  # How Densewire::Client retries (SPEC.md section 11's 429 and 503): a request answered 429 (the
  # server's admission is full) or 503 (a model or table still loading, a server draining), or whose
  # connection failed before any answer came back (refused, reset, closed), is sent again after a
  # full-jitter exponential backoff, uniform in [0, min(max_delay, base_delay * 2**(n - 1))) seconds
  # for retry n, added to the server's Retry-After (seconds or an HTTP date, at most a minute). A 4xx
  # that is the caller's fault is never retried.
  class Retry
    # The connection failed before any byte of an answer: safe to send again.
    CONNECTION_ERRORS = [Errno::ECONNREFUSED, Errno::ECONNRESET, Errno::EPIPE, Errno::ECONNABORTED,
                         Errno::EHOSTUNREACH, Errno::ENETUNREACH, EOFError, Net::OpenTimeout].freeze
    RETRY_STATUSES = [429, 503].freeze
    MAX_RETRY_AFTER = 60.0

    attr_reader :max_retries, :base_delay, :max_delay

    # +max_retries+: retries after the first attempt (2, as the OpenAI SDKs; 0 never retries).
    # +base_delay+ and +max_delay+: the backoff's first bound and cap, in seconds.
    def initialize(max_retries: 2, base_delay: 0.5, max_delay: 8.0, random: Random.new)
      unless max_retries.is_a?(Integer) && max_retries >= 0
        raise ArgumentError, "max_retries must be a non-negative Integer, got #{max_retries.inspect}"
      end
      [[:base_delay, base_delay], [:max_delay, max_delay]].each do |name, v|
        raise ArgumentError, "#{name} must be a non-negative number of seconds, got #{v.inspect}" unless v.is_a?(Numeric) && v >= 0 && v.finite?
      end

      @max_retries = max_retries
      @base_delay = base_delay.to_f
      @max_delay = max_delay.to_f
      @random = random
    end

    # The same policy with another max_retries.
    def with(max_retries:)
      Retry.new(max_retries: max_retries, base_delay: @base_delay, max_delay: @max_delay, random: @random)
    end

    # The full-jitter backoff before retry +n+ (1, 2, ...), in seconds.
    def backoff(n)
      bound = [@max_delay, @base_delay * (2**[n - 1, 60].min)].min
      @random.rand * bound
    end

    # A Retry-After value in seconds from +now+: delay-seconds or an HTTP date (a past one is 0), at
    # most a minute; nil when missing or unreadable.
    def self.parse_retry_after(value, now: Time.now)
      text = value.to_s.strip
      return nil if text.empty?
      return [Float(text), MAX_RETRY_AFTER].min if text.match?(/\A[0-9]+(\.[0-9]+)?\z/)
      return nil unless text.match?(/[a-z]/i)

      (Time.httpdate(text) - now).clamp(0.0, MAX_RETRY_AFTER)
    rescue ArgumentError
      nil
    end

    # Runs the block (one attempt, given its number, returning a Net::HTTPResponse) until an answer
    # that is not retried, or the retries are spent; returns [response, attempts]. Raises
    # ConnectionError when the connection failed on the last attempt.
    def run(what)
      attempt = 0
      loop do
        attempt += 1
        begin
          response = yield attempt
        rescue *CONNECTION_ERRORS => e
          raise ConnectionError.new("#{what}: #{e.class}: #{e.message}", attempts: attempt) if attempt > @max_retries

          sleep(backoff(attempt))
          next
        end
        return [response, attempt] unless RETRY_STATUSES.include?(response.code.to_i) && attempt <= @max_retries

        sleep((Retry.parse_retry_after(response["Retry-After"]) || 0) + backoff(attempt))
      end
    end
  end
end
