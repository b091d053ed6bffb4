#include "redis/stream.hpp"

#include <array>
#include <boost/asio/connect.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <charconv>

#include "floodgate/errors.hpp"
#include "redis/resp_reader.hpp"
#include "redis/resp_writer.hpp"

namespace floodgate::redis {

namespace asio = boost::asio;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using boost::system::error_code;

stream_config sentinel_stream_config(const redis_endpoint& ep, const redis_options& options,
                                     tls_context_result tls) {
  stream_config c;
  c.endpoint = ep;
  c.tls = options.tls;
  c.tls_context = std::move(tls);
  c.greeting.user = options.sentinel_user;
  c.greeting.password = options.sentinel_password;
  c.connect_timeout = options.connect_timeout;
  c.max_reply_size = options.max_reply_size;
  c.peer = "the sentinel";
  return c;
}

stream_config node_stream_config(const redis_endpoint& ep, const redis_options& options,
                                 tls_context_result tls) {
  stream_config c = sentinel_stream_config(ep, options, std::move(tls));
  c.greeting.user = ep.user;
  c.greeting.password = ep.password;
  c.greeting.db = ep.db;
  c.peer = "the server";
  return c;
}

tls_context_result make_tls_context(const tls_options& o) {
  tls_context_result out;
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                   ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
  error_code ec;
  auto failed = [&](const std::string& what) {
    out.error = what + ": " + ec.message();
    return out;
  };
  if (o.ca_file.empty()) {
    if (ctx->set_default_verify_paths(ec); ec) return failed("the system's CAs");
  } else if (ctx->load_verify_file(o.ca_file, ec); ec) {
    return failed("tls ca_file '" + o.ca_file + "'");
  }
  if (o.cert_file.empty() != o.key_file.empty()) {
    out.error = "tls cert_file and key_file go together: give both or neither";
    return out;
  }
  if (!o.cert_file.empty()) {
    if (ctx->use_certificate_chain_file(o.cert_file, ec); ec)
      return failed("tls cert_file '" + o.cert_file + "'");
    if (ctx->use_private_key_file(o.key_file, ssl::context::pem, ec); ec)
      return failed("tls key_file '" + o.key_file + "'");
  }
  ctx->set_verify_mode(o.verify_peer ? ssl::verify_peer : ssl::verify_none);
  out.context = std::move(ctx);
  return out;
}

void name_tls_peer(ssl::stream<tcp::socket&>& tls, const std::string& name, bool verify) {
  error_code not_an_address;
  asio::ip::make_address(name, not_an_address);
  if (not_an_address) SSL_set_tlsext_host_name(tls.native_handle(), name.c_str());
  if (verify) tls.set_verify_callback(ssl::host_name_verification(name));
}

namespace {

// HELLO's reply judged: empty when the server will do (Redis >= 7.0: floodgate's scripts start
// with #!lua; or a user the ACL denies HELLO), else why not. It holds "version", "x.y.z".
std::string check_version(const reply& r) {
  if (r.is_error()) {
    if (r.error_code() == "NOPERM") return {};
    return "handshake: HELLO refused (" + r.str + "): floodgate needs Redis >= 7.0";
  }
  for (std::size_t i = 0; i + 1 < r.elements.size(); i += 2) {
    if (r.elements[i].str != "version") continue;
    const std::string& v = r.elements[i + 1].str;
    int major = 0;
    std::from_chars(v.data(), v.data() + v.size(), major);
    if (major >= 7) return {};
    return "Redis " + v +
           " is too old: floodgate needs Redis >= 7.0 (its scripts start with #!lua)";
  }
  return {};
}

}  // namespace

// One attempt to connect, and the connection it makes: handlers hold it and ignore their
// completion once it is no longer the stream's current one.
struct stream::session {
  session(asio::io_context& io, std::size_t max_reply_size)
      : socket(io), resolver(io), timer(io), reader(max_reply_size) {}
  tcp::socket socket;
  tcp::resolver resolver;
  asio::steady_timer timer;  // connect_timeout, until ready
  // Over `socket`, for a rediss:// endpoint (after `socket`: destroyed before it).
  std::unique_ptr<ssl::stream<tcp::socket&>> tls;
  resp_reader reader;
  std::array<char, 16 * 1024> read_buffer;
  std::string pending;   // encoded commands not yet written
  std::string writing;   // the write in progress
  bool greeted = false;  // the greeting is written (or being): pending may follow it
  // The greeting's replies still due, in order: what each command was, for its error; the
  // empty name is HELLO's (check_version).
  std::vector<std::string> due;
  std::size_t answered = 0;                      // of `due`
  std::size_t function_load = no_function_load;  // FUNCTION LOAD's place in `due`
  bool ready = false;
  bool functions = false;  // the library is loaded (by us or by anyone before)
  static constexpr std::size_t no_function_load = static_cast<std::size_t>(-1);
};

stream::stream(asio::io_context& io, stream_owner& owner) : io_(io), owner_(owner) {}

stream::~stream() {
  close();
}

bool stream::functions_loaded() const noexcept {
  return session_ && session_->functions;
}

std::string& stream::out() noexcept {
  return session_->pending;
}

bool stream::writing() const noexcept {
  return session_ && !session_->writing.empty();
}

bool stream::bytes_waiting() const {
  if (!session_) return false;
  error_code ec;
  return (session_->socket.available(ec) > 0 && !ec) ||
         (session_->tls && SSL_pending(session_->tls->native_handle()) > 0);
}

void stream::close() {
  if (!session_) return;
  error_code ignored;
  session_->timer.cancel();
  session_->resolver.cancel();
  session_->socket.close(ignored);
  session_.reset();
}

void stream::open(const stream_config& config) {
  close();
  config_ = config;
  auto s = std::make_shared<session>(io_, config_.max_reply_size);
  session_ = s;
  s->timer.expires_after(config_.connect_timeout);
  s->timer.async_wait([this, s](const error_code& ec) {
    if (ec || s != session_ || s->ready) return;
    fail(s,
         "no connection and handshake within connect_timeout (" +
             std::to_string(config_.connect_timeout.count()) + " ms)",
         errc::not_connected);
  });
  connect(s);
}

void stream::connect(const session_ptr& s) {
  auto to = [this, s](const tcp::resolver::results_type& addresses) {
    asio::async_connect(s->socket, addresses, [this, s](const error_code& e, const tcp::endpoint&) {
      if (s != session_) return;
      if (e) return fail(s, "connect: " + e.message(), errc::not_connected);
      connected(s);
    });
  };
  const auto& ep = config_.endpoint;
  error_code not_an_address;
  const auto address = asio::ip::make_address(ep.host, not_an_address);
  if (!not_an_address)  // no resolver (and its thread) for an address
    return to(tcp::resolver::results_type::create(tcp::endpoint(address, ep.port), ep.host,
                                                  std::to_string(ep.port)));
  s->resolver.async_resolve(
      ep.host, std::to_string(ep.port),
      [this, s, to](const error_code& e, const tcp::resolver::results_type& addresses) {
        if (s != session_) return;
        // The host named, as operations.md shows it: what failed is the name.
        if (e)
          return fail(s, "resolve " + config_.endpoint.host + ": " + e.message(),
                      errc::not_connected);
        to(addresses);
      });
}

// Connected: TLS first for rediss://, then the greeting.
void stream::connected(const session_ptr& s) {
  error_code ignored;
  s->socket.set_option(tcp::no_delay(true), ignored);
  if (!config_.endpoint.tls) return greet(s);
  if (!config_.tls_context.context)
    return fail(s, "TLS: " + config_.tls_context.error, errc::not_connected);
  s->tls = std::make_unique<ssl::stream<tcp::socket&>>(s->socket, *config_.tls_context.context);
  const auto& o = config_.tls;
  name_tls_peer(*s->tls, o.server_name.empty() ? config_.endpoint.host : o.server_name,
                o.verify_peer);
  s->tls->async_handshake(ssl::stream_base::client, [this, s](const error_code& ec) {
    if (s != session_) return;
    if (ec) return fail(s, "TLS handshake: " + ec.message(), errc::not_connected);
    greet(s);
  });
}

// The greeting goes in one write, with whatever the owner queued behind it: AUTH, SELECT,
// HELLO, then FUNCTION LOAD or, without a library, SCRIPT LOADs (load_scripts), so a ready
// connection does not meet NOSCRIPT (or a missing function) unless the scripts are flushed
// later.
void stream::greet(const session_ptr& s) {
  const auto& g = config_.greeting;
  std::string hello;
  if (g.password) {
    if (g.user.empty())
      append_command(hello, {"AUTH", *g.password});
    else
      append_command(hello, {"AUTH", g.user, *g.password});
    s->due.emplace_back("AUTH refused");
  }
  if (g.db != 0) {
    append_command(hello, {"SELECT", std::to_string(g.db)});
    s->due.push_back("SELECT " + std::to_string(g.db));
  }
  if (g.check_version) {
    // HELLO without a version answers the server's version in the current protocol (RESP2).
    append_command(hello, {"HELLO"});
    s->due.emplace_back();
  }
  if (!g.library.empty()) {
    append_command(hello, {"FUNCTION", "LOAD", g.library});
    s->function_load = s->due.size();
    s->due.emplace_back("FUNCTION LOAD");
  }
  if (g.library.empty()) load_scripts(*s, hello);
  s->greeted = true;
  s->pending.insert(0, hello);
  read(s);
  if (s->due.empty()) {
    ready(s);
    if (s != session_) return;
  }
  write(s);
}

void stream::load_scripts(session& s, std::string& out) const {
  for (const auto source : config_.greeting.scripts) {
    append_command(out, {"SCRIPT", "LOAD", source});
    s.due.emplace_back("SCRIPT LOAD");
  }
}

void stream::ready(const session_ptr& s) {
  s->ready = true;
  s->timer.cancel();
  owner_.stream_ready();
}

void stream::flush() {
  if (session_ && session_->greeted) write(session_);
}

void stream::write(const session_ptr& s) {
  if (!s->writing.empty() || s->pending.empty()) return;
  s->writing.swap(s->pending);
  auto done = [this, s](const error_code& ec, std::size_t) {
    if (s != session_) return;
    if (ec) return fail(s, "write: " + ec.message(), errc::not_connected);
    s->writing.clear();
    if (!s->pending.empty()) return write(s);
    owner_.stream_written();
  };
  if (s->tls)
    asio::async_write(*s->tls, asio::buffer(s->writing), std::move(done));
  else
    asio::async_write(s->socket, asio::buffer(s->writing), std::move(done));
}

bool stream::greeting_reply(const session_ptr& s, reply& r) {
  const std::size_t at = s->answered++;
  if (at == s->function_load) {
    // Not fatal: without the library, calls go as EVALSHA (an ACL without FUNCTION or FCALL,
    // a replica, a proxy). A library of that name is this one: the name is its text's hash.
    s->functions = library_loaded(r);
    if (!s->functions) {
      // Calls will go as EVALSHA: their scripts, before the connection is ready.
      load_scripts(*s, s->pending);
      write(s);
    }
  } else {
    const std::string& what = s->due[at];
    const std::string why = what.empty()   ? check_version(r)
                            : r.is_error() ? what + ": " + r.str
                                           : std::string();
    if (!why.empty()) {
      fail(s, why, errc::not_connected);
      return false;
    }
  }
  if (s->answered == s->due.size()) ready(s);
  return s == session_;
}

bool library_loaded(const reply& r) noexcept {
  if (!r.is_error()) return r.kind == reply::type::string || r.kind == reply::type::status;
  return r.str.starts_with("ERR Library '") && r.str.ends_with("' already exists");
}

void stream::read(const session_ptr& s) {
  auto done = [this, s](const error_code& ec, std::size_t n) {
    if (s != session_) return;
    if (ec)
      return fail(s, ec == asio::error::eof ? "closed by " + config_.peer : "read: " + ec.message(),
                  errc::not_connected);
    s->reader.feed(std::string_view(s->read_buffer.data(), n));
    reply r;
    for (;;) {
      const auto result = s->reader.next(r);
      if (result == resp_reader::result::need_more) break;
      if (result == resp_reader::result::error)
        return fail(s, "protocol error: " + s->reader.error_message(), errc::protocol_error);
      if (!s->ready) {
        if (!greeting_reply(s, r)) return;
        continue;
      }
      owner_.stream_reply(r);
      if (s != session_) return;  // the owner closed or reopened it
    }
    owner_.stream_read_done();
    if (s != session_) return;
    read(s);
  };
  if (s->tls)
    s->tls->async_read_some(asio::buffer(s->read_buffer), std::move(done));
  else
    s->socket.async_read_some(asio::buffer(s->read_buffer), std::move(done));
}

void stream::fail(const session_ptr& s, const std::string& why, std::error_code ec) {
  if (s != session_) return;
  close();
  owner_.stream_closed(why, ec);
}

stream_link::stream_link(boost::asio::io_context& io, stream_config config, handlers h)
    : config_(std::move(config)), handlers_(std::move(h)), stream_(io, *this) {}

void stream_link::send(std::string_view command) {
  if (!stream_.is_open()) return;
  stream_.out().append(command);
  stream_.flush();
}

void stream_link::stream_closed(const std::string& why, std::error_code) {
  handlers_.on_closed(endpoint_label(config_.endpoint) + ": " + why);
}

}  // namespace floodgate::redis
