#include "redis/sentinel_socket.hpp"

#include <array>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include "redis/resp_reader.hpp"
#include "redis/resp_writer.hpp"

namespace floodgate::redis {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using boost::system::error_code;

// One attempt to connect, and the connection it makes: handlers hold it and ignore their
// completion once it is no longer the socket's current one.
struct sentinel_socket::session {
  session(asio::io_context& io, std::size_t max_reply_size)
      : socket(io), resolver(io), timer(io), reader(max_reply_size) {}
  tcp::socket socket;
  tcp::resolver resolver;
  asio::steady_timer timer;  // connect_timeout, until ready
  std::unique_ptr<asio::ssl::stream<tcp::socket&>> tls;
  resp_reader reader;
  std::array<char, 4096> read_buffer;
  std::string pending;  // encoded commands not yet written
  std::string writing;  // the write in progress
  bool ready = false;   // connected (and TLS done): pending is written as it comes
  bool auth_reply_due = false;
};

sentinel_socket::sentinel_socket(asio::io_context& io, redis_endpoint endpoint,
                                 const redis_options& options,
                                 std::shared_ptr<asio::ssl::context> tls, std::string tls_error,
                                 handlers h, std::string peer)
    : io_(io),
      endpoint_(std::move(endpoint)),
      options_(options),
      tls_(std::move(tls)),
      tls_error_(std::move(tls_error)),
      handlers_(std::move(h)),
      peer_(std::move(peer)) {}

sentinel_socket::~sentinel_socket() {
  close();
}

void sentinel_socket::close() {
  if (!session_) return;
  error_code ignored;
  session_->timer.cancel();
  session_->resolver.cancel();
  session_->socket.close(ignored);
  session_.reset();
}

void sentinel_socket::open() {
  close();
  auto s = std::make_shared<session>(io_, options_.max_reply_size);
  session_ = s;
  if (options_.sentinel_password) {
    const auto& password = *options_.sentinel_password;
    if (options_.sentinel_user.empty())
      append_command(s->pending, {"AUTH", password});
    else
      append_command(s->pending, {"AUTH", options_.sentinel_user, password});
    s->auth_reply_due = true;
  }
  s->timer.expires_after(options_.connect_timeout);
  s->timer.async_wait([this, s](const error_code& ec) {
    if (ec || s != session_ || s->ready) return;
    fail(s, "no connection within connect_timeout");
  });
  error_code ec;
  const auto address = asio::ip::make_address(endpoint_.host, ec);
  if (!ec) {
    s->socket.async_connect(tcp::endpoint(address, endpoint_.port), [this, s](const error_code& e) {
      if (s != session_) return;
      if (e) return fail(s, "connect: " + e.message());
      connected(s);
    });
    return;
  }
  s->resolver.async_resolve(
      endpoint_.host, std::to_string(endpoint_.port),
      [this, s](const error_code& e, const tcp::resolver::results_type& results) {
        if (s != session_) return;
        if (e) return fail(s, "resolve: " + e.message());
        asio::async_connect(s->socket, results,
                            [this, s](const error_code& e2, const tcp::endpoint&) {
                              if (s != session_) return;
                              if (e2) return fail(s, "connect: " + e2.message());
                              connected(s);
                            });
      });
}

void sentinel_socket::connected(const session_ptr& s) {
  error_code ignored;
  s->socket.set_option(tcp::no_delay(true), ignored);
  if (!endpoint_.tls) return ready(s);
  if (!tls_) return fail(s, "TLS: " + tls_error_);
  namespace ssl = asio::ssl;
  s->tls = std::make_unique<ssl::stream<tcp::socket&>>(s->socket, *tls_);
  const auto& o = options_.tls;
  const std::string& name = o.server_name.empty() ? endpoint_.host : o.server_name;
  error_code is_address;
  asio::ip::make_address(name, is_address);
  if (is_address) SSL_set_tlsext_host_name(s->tls->native_handle(), name.c_str());
  if (o.verify_peer) s->tls->set_verify_callback(ssl::host_name_verification(name));
  s->tls->async_handshake(ssl::stream_base::client, [this, s](const error_code& ec) {
    if (s != session_) return;
    if (ec) return fail(s, "TLS handshake: " + ec.message());
    ready(s);
  });
}

void sentinel_socket::ready(const session_ptr& s) {
  s->ready = true;
  s->timer.cancel();
  read(s);
  flush(s);
}

void sentinel_socket::send(std::string_view command) {
  if (!session_) return;
  session_->pending.append(command);
  if (session_->ready) flush(session_);
}

void sentinel_socket::flush(const session_ptr& s) {
  if (!s->writing.empty() || s->pending.empty()) return;
  s->writing.swap(s->pending);
  auto done = [this, s](const error_code& ec, std::size_t) {
    if (s != session_) return;
    if (ec) return fail(s, "write: " + ec.message());
    s->writing.clear();
    flush(s);
  };
  if (s->tls)
    asio::async_write(*s->tls, asio::buffer(s->writing), done);
  else
    asio::async_write(s->socket, asio::buffer(s->writing), done);
}

void sentinel_socket::read(const session_ptr& s) {
  auto done = [this, s](const error_code& ec, std::size_t n) {
    if (s != session_) return;
    if (ec)
      return fail(s, ec == asio::error::eof ? "closed by " + peer_ : "read: " + ec.message());
    s->reader.feed({s->read_buffer.data(), n});
    reply r;
    while (s->reader.next(r) == resp_reader::result::reply) {
      if (s->auth_reply_due) {
        s->auth_reply_due = false;
        if (r.is_error()) return fail(s, "AUTH refused: " + r.str);
        continue;
      }
      handlers_.on_reply(r);
      if (s != session_) return;  // the handler closed or reopened it
    }
    if (s->reader.failed()) return fail(s, "bad reply: " + s->reader.error_message());
    read(s);
  };
  if (s->tls)
    s->tls->async_read_some(asio::buffer(s->read_buffer), done);
  else
    s->socket.async_read_some(asio::buffer(s->read_buffer), done);
}

void sentinel_socket::fail(const session_ptr& s, std::string why) {
  if (s != session_) return;
  close();
  handlers_.on_closed(endpoint_.host + ":" + std::to_string(endpoint_.port) + ": " + why);
}

}  // namespace floodgate::redis
