// One connection to a Redis server or a sentinel, the way every socket of the Redis layer makes
// it: resolve the host (unless it is an address), connect, TLS with SNI and verification for
// rediss://, then the greeting (AUTH, SELECT, HELLO's version check, FUNCTION LOAD, SCRIPT LOADs),
// all within connect_timeout; then whatever the owner writes, and every reply read into the RESP
// reader and handed to the owner in order.
//
//   stream s{io, owner};
//   s.open(config);                 // owner.stream_ready() once the greeting is answered
//   s.out() += encoded_commands;    // may be queued before then: written after the greeting
//   s.flush();
//   s.close();                      // no owner call after it
//
// A failure closes the stream and tells the owner why (stream_closed), once; the owner decides
// whether and when to open it again (connection.hpp: with backoff). Each open() is a new
// attempt: completions of an earlier one never reach the owner. Internal and Asio-based;
// everything runs on the io_context's one thread: no locks. Owner calls run from the stream's
// completion handlers, never inside open(), flush() or close().
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "floodgate/options.hpp"
#include "redis/reply.hpp"
#include "redis/url.hpp"

namespace floodgate::redis {

// The TLS context for options.tls (CAs, client certificate, verification), or the reason it
// cannot be made (a file missing or unreadable, a key that does not match its certificate).
// Made once per client and shared by its streams: it reads the CA and key files.
struct tls_context_result {
  std::shared_ptr<boost::asio::ssl::context> context;
  std::string error;
};
tls_context_result make_tls_context(const tls_options& options);

// What the stream sends first, in one write with anything already queued; each reply must not
// be an error, or the stream fails with the server's words ("AUTH refused: WRONGPASS ...").
struct stream_greeting {
  std::string user;                     // AUTH user password; empty: AUTH password
  std::optional<std::string> password;  // none: no AUTH
  std::int64_t db = 0;                  // SELECT it when not 0
  bool check_version = false;           // HELLO, refusing a Redis older than 7.0
  // SCRIPT LOAD each (the text outlives the stream): when there is no library, or once the
  // server refused it (then in a second write, after FUNCTION LOAD's reply). Calls of a loaded
  // library go as FCALL and never need them; a call sent as EVALSHA later (the library
  // flushed) loads its script on demand after NOSCRIPT.
  std::vector<std::string_view> scripts;
  // FUNCTION LOAD it, unless empty (the text outlives the stream). Its error does not fail
  // the stream: see stream::functions_loaded().
  std::string_view library;
};

struct stream_config {
  redis_endpoint endpoint;         // host and port; tls. Its credentials and db are not used:
                                   // the greeting says whom to be.
  tls_options tls;                 // server_name and verify_peer (the files are in tls_context)
  tls_context_result tls_context;  // for endpoint.tls; no context fails every open
  stream_greeting greeting;
  std::chrono::milliseconds connect_timeout{1000};  // connect, TLS and greeting, together
  std::size_t max_reply_size = 1 << 20;             // resp_reader's cap
  std::string peer = "the server";                  // the other end, in "closed by the server"
};

// How a sentinel at `ep` is reached: TLS as the endpoint says, AUTH with options'
// sentinel_user and sentinel_password, no SELECT.
stream_config sentinel_stream_config(const redis_endpoint& ep, const redis_options& options,
                                     tls_context_result tls);
// How a Redis node at `ep` is reached: as a sentinel, but AUTH and SELECT as `ep` says.
stream_config node_stream_config(const redis_endpoint& ep, const redis_options& options,
                                 tls_context_result tls);

class stream_owner {
 public:
  // Connected, TLS done, and every greeting reply in.
  virtual void stream_ready() = 0;
  // A reply to what the owner wrote, in order.
  virtual void stream_reply(reply& r) = 0;
  // The replies of one read were all handed over.
  virtual void stream_read_done() {}
  // Everything given to flush() has been written.
  virtual void stream_written() {}
  // The stream failed and is closed: `why` does not name the endpoint (the owner does).
  // `ec` is errc::protocol_error for bytes that are not RESP, errc::not_connected otherwise.
  virtual void stream_closed(const std::string& why, std::error_code ec) = 0;

 protected:
  ~stream_owner() = default;
};

class stream {
 public:
  stream(boost::asio::io_context& io, stream_owner& owner);
  ~stream();
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;

  // Starts connecting, closing any connection it had first. `config` is copied.
  void open(const stream_config& config);
  // Closes the connection, silently.
  void close();
  bool is_open() const noexcept { return session_ != nullptr; }
  // Once ready: whether the greeting's library is loaded on the server (FUNCTION LOAD answered
  // its name, or that a library of that name exists).
  bool functions_loaded() const noexcept;

  // The bytes to write next: append encoded commands here (only while open), then flush().
  std::string& out() noexcept;
  // Writes out() unless a write is in progress (its completion writes what came meanwhile).
  // Before the greeting is written, out() waits for it.
  void flush();
  bool writing() const noexcept;
  // Bytes that have arrived but are not read yet (in the socket or decrypted in OpenSSL).
  bool bytes_waiting() const;

 private:
  struct session;
  using session_ptr = std::shared_ptr<session>;

  void connect(const session_ptr& s);
  void connected(const session_ptr& s);
  void greet(const session_ptr& s);
  // Appends a SCRIPT LOAD of each greeting script to `out`, each a reply due in `s`.
  void load_scripts(session& s, std::string& out) const;
  void write(const session_ptr& s);
  void read(const session_ptr& s);
  // Consumes a greeting reply; false when it failed the stream.
  bool greeting_reply(const session_ptr& s, reply& r);
  void ready(const session_ptr& s);
  void fail(const session_ptr& s, const std::string& why, std::error_code ec);

  boost::asio::io_context& io_;
  stream_owner& owner_;
  stream_config config_;
  session_ptr session_;
};

// A stream whose replies and closing go to callbacks, for the sockets that are not
// a client's pipelined connections: the Sentinel client's two per sentinel (questions, and the
// subscription) and the inspection API's questions (url_asker.hpp). It never reconnects by
// itself and keeps no deadlines beyond connecting's: the owner decides (an ask has a deadline,
// a subscription retries with backoff.hpp's policy).
//
//   stream_link s{io, sentinel_stream_config(ep, options, tls), {on_reply, on_closed}};
//   s.open();                                    // AUTH is sent first when configured
//   s.send(command);                             // queued until connected
//   s.close();                                   // no handler runs after it
//
// Internal and Asio-based; everything runs on the owner's io thread: no locks.
class stream_link final : private stream_owner {
 public:
  struct handlers {
    std::function<void(reply&)> on_reply;               // a reply, the greeting's excepted
    std::function<void(const std::string&)> on_closed;  // why, with the endpoint; closed already
  };

  stream_link(boost::asio::io_context& io, stream_config config, handlers h);
  stream_link(const stream_link&) = delete;
  stream_link& operator=(const stream_link&) = delete;

  // Starts connecting with config(), closing any connection it had first.
  void open() { stream_.open(config_); }
  // Appends an encoded command; written once connected (open() must have been called).
  void send(std::string_view command);
  // Closes the connection, silently.
  void close() { stream_.close(); }
  bool is_open() const noexcept { return stream_.is_open(); }
  const redis_endpoint& endpoint() const noexcept { return config_.endpoint; }
  // Read at each open().
  stream_config& config() noexcept { return config_; }

 private:
  void stream_ready() override {}
  void stream_reply(reply& r) override { handlers_.on_reply(r); }
  void stream_closed(const std::string& why, std::error_code ec) override;

  stream_config config_;
  handlers handlers_;
  stream stream_;
};

// Names the peer of a TLS stream about to shake hands with `name` (the endpoint's host, or
// tls.server_name): SNI when it is a host name (RFC 6066 allows no address there), and, when
// verifying, the certificate must name it (its DNS names, or its IP addresses for an address).
void name_tls_peer(boost::asio::ssl::stream<boost::asio::ip::tcp::socket&>& tls,
                   const std::string& name, bool verify);

// Whether FUNCTION LOAD's reply `r` means the library is there: loaded now, or a library of
// the same name already was.
bool library_loaded(const reply& r) noexcept;

}  // namespace floodgate::redis
