# frozen_string_literal: true

require "socket"

# A small HTTP/1.1 server on 127.0.0.1 for tests (WEBrick left Ruby's standard library): keep-alive,
# Content-Length bodies, one thread per connection. The handler gets a Request and returns
# [status, headers, body], or :close to close the connection without answering. Counts connections
# so tests can check that the client reuses one.
class TinyHTTPServer
  Request = Struct.new(:method, :path, :headers, :body)
  REASONS = { 200 => "OK", 304 => "Not Modified", 405 => "Method Not Allowed", 400 => "Bad Request", 401 => "Unauthorized", 404 => "Not Found", 406 => "Not Acceptable",
              415 => "Unsupported Media Type", 422 => "Unprocessable Entity", 500 => "Internal Server Error",
              429 => "Too Many Requests", 503 => "Service Unavailable" }.freeze

  attr_reader :port, :connections, :requests

  def initialize(&handler)
    @handler = handler
    @server = TCPServer.new("127.0.0.1", 0)
    @port = @server.addr[1]
    @connections = 0
    @requests = []
    @threads = []
    @close_after_next = false
    @acceptor = Thread.new { accept_loop }
  end

  def url
    "http://127.0.0.1:#{@port}"
  end

  # The next response closes its connection without saying so (as an idle keep-alive timeout would).
  def drop_connection_after_next_response!
    @close_after_next = true
  end

  def stop
    @server.close
    @acceptor.kill
    @threads.each(&:kill)
  end

  private

  def accept_loop
    loop do
      socket = @server.accept
      @connections += 1
      @threads << Thread.new(socket) { |s| serve(s) }
    end
  rescue IOError, Errno::EBADF
    nil
  end

  def serve(socket)
    loop do
      request = read_request(socket)
      break unless request

      @requests << request
      answer = @handler.call(request)
      break if answer == :close

      status, headers, body = answer
      body = body.to_s.b
      head = +"HTTP/1.1 #{status} #{REASONS.fetch(status, "Status")}\r\n"
      headers.merge("Content-Length" => body.bytesize.to_s).each { |k, v| head << "#{k}: #{v}\r\n" }
      socket.write(head << "\r\n", body)
      if @close_after_next || request.headers["connection"].to_s.casecmp?("close")
        @close_after_next = false
        break
      end
    end
  rescue IOError, SystemCallError
    nil
  ensure
    socket.close unless socket.closed?
  end

  def read_request(socket)
    line = socket.gets("\r\n")
    return nil if line.nil?

    method, path, = line.split(" ")
    headers = {}
    while (h = socket.gets("\r\n")) && h != "\r\n"
      name, value = h.split(":", 2)
      headers[name.strip.downcase] = value.to_s.strip
    end
    body = socket.read(headers.fetch("content-length", "0").to_i).to_s
    Request.new(method, path, headers, body)
  end
end
