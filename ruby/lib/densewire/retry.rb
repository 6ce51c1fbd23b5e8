# frozen_string_literal: true

require "net/http"
require "socket"
require "time"

module Densewire
  # The retry schedule of every densewire client (SPEC.md section 18): a request answered 429 (the
  # server's admission is full) or 503 (a model or table still loading, a server draining), or whose
  # connection failed before any byte of an answer came (refused, reset, closed, a name that did not
  # resolve, a host that could not be reached), is sent again. Retry n (1 for the first) waits
  # +draw * min(max_delay, base_delay * 2**(n - 1))+ seconds (full jitter, +draw+ uniform in [0, 1)
  # from +random+) on top of the server's Retry-After; a Retry-After over a minute is not waited for:
  # the error comes at once and carries it (HTTPError#retry_after). Anything else is never retried:
  # other statuses (4xx, the caller's fault; 500, 502, 504), this client's timeouts, an answer that
  # broke off after its head came.
  class Retry
    # The connection failed before any byte of an answer: safe to send again.
    CONNECTION_ERRORS = [Errno::ECONNREFUSED, Errno::ECONNRESET, Errno::EPIPE, Errno::ECONNABORTED,
                         Errno::EHOSTUNREACH, Errno::ENETUNREACH, Errno::EADDRNOTAVAIL, SocketError, EOFError].freeze
    RETRY_STATUSES = [429, 503].freeze
    # A Retry-After longer than this (seconds) is not waited for: the error is raised at once.
    MAX_RETRY_AFTER = 60.0

    # Raised by a client's attempt when its connection failed after the answer's head came (the
    # cause is the I/O error): not retried, the server may have done the work.
    class AnswerBrokeOff < StandardError; end

    attr_reader :max_retries, :base_delay, :max_delay, :random

    # +max_retries+: retries after the first attempt (2, as the OpenAI SDKs; 0 never retries).
    # +base_delay+ and +max_delay+: the backoff's first bound and cap, in seconds. +random+: the
    # source of the draws, anything whose +rand+ returns a Float uniform in [0, 1) (Random.new(7) for
    # a reproducible schedule; an object returning a constant to test one wait).
    def initialize(max_retries: 2, base_delay: 0.5, max_delay: 8.0, random: Random.new)
      unless max_retries.is_a?(Integer) && max_retries >= 0
        raise ArgumentError, "max_retries must be a non-negative Integer, got #{max_retries.inspect}"
      end
      [[:base_delay, base_delay], [:max_delay, max_delay]].each do |name, v|
        raise ArgumentError, "#{name} must be a non-negative number of seconds, got #{v.inspect}" unless v.is_a?(Numeric) && v >= 0 && v.finite?
      end
      raise ArgumentError, "random must respond to rand, got #{random.inspect}" unless random.respond_to?(:rand)

      @max_retries = max_retries
      @base_delay = base_delay.to_f
      @max_delay = max_delay.to_f
      @random = random
    end

    # The same policy with another max_retries.
    def with(max_retries:)
      Retry.new(max_retries: max_retries, base_delay: @base_delay, max_delay: @max_delay, random: @random)
    end

    # The full-jitter backoff before retry +n+ (1, 2, ...), in seconds: a draw times
    # min(max_delay, base_delay * 2**(n - 1)) (Math.ldexp scales by the exact power of two; it is
    # Infinity when it overflows, so that a large n gives max_delay).
    def backoff(n)
      @random.rand * [@max_delay, Math.ldexp(@base_delay, n - 1)].min
    end

    # Seconds to wait before retry +n+ (1 for the first) of a request whose attempt failed with
    # +status+ (0: the connection failed before any answer) and this Retry-After header value (nil
    # when absent), +now+ the clock (Unix seconds, for HTTP dates); nil: give up (a status that is not
    # retried, the retries spent, or the server asking for more than MAX_RETRY_AFTER seconds). The
    # retry loop's only rule (SPEC.md 18.2), in Float (binary64) in the spec's order.
    def wait(n, status: 0, retry_after: nil, now: Time.now.to_f)
      return nil unless status.zero? || RETRY_STATUSES.include?(status)
      return nil if n > @max_retries

      seconds = Retry.parse_retry_after(retry_after, now: now)
      return nil if seconds && seconds > MAX_RETRY_AFTER

      jitter = backoff(n)
      seconds ? seconds + jitter : jitter
    end

    # A Retry-After value (RFC 9110 section 10.2.3) in seconds from +now+ (a Time or Unix seconds),
    # SPEC.md 18.2: after removing leading and trailing spaces and tabs, ASCII digits are
    # delay-seconds (any number of them: a huge one is more than a minute), an HTTP date is its
    # distance from now (a past one is 0); anything else (1.5, -1, +3, soon, empty) and nil are nil.
    def self.parse_retry_after(value, now: Time.now)
      return nil if value.nil?

      text = value.to_s.gsub(/\A[ \t]+|[ \t]+\z/, "")
      return Float(text) if text.match?(/\A[0-9]+\z/) # decimal (leading zeros too), correctly rounded
      return nil unless text.match?(/\A[A-Za-z]{3}/)

      [0.0, Time.httpdate(text).to_i.to_f - now.to_f].max
    rescue ArgumentError
      nil
    end

    # Runs the block (one attempt, given its number, returning a Net::HTTPResponse) until an answer
    # that is not retried, or the retries are spent; returns [response, attempts]. Raises
    # ConnectionError when the connection failed on the last attempt, or broke off after the answer's
    # head came (never retried).
    def run(what)
      attempt = 0
      loop do
        attempt += 1
        begin
          response = yield attempt
        rescue *CONNECTION_ERRORS => e
          seconds = wait(attempt)
          raise ConnectionError.new("#{what}: #{e.class}: #{e.message}", attempts: attempt) if seconds.nil?

          sleep(seconds)
          next
        rescue AnswerBrokeOff => e
          raise ConnectionError.new("#{what}: the answer broke off after its head: #{e.cause.class}: #{e.message}",
                                    attempts: attempt)
        end
        status = response.code.to_i
        return [response, attempt] unless RETRY_STATUSES.include?(status)

        seconds = wait(attempt, status: status, retry_after: response["Retry-After"])
        return [response, attempt] if seconds.nil?

        sleep(seconds)
      end
    end
  end
end
