#include "tls_relay.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <thread>
#include <unordered_map>

#include "floodgate/errors.hpp"
#include "logging/log_format.hpp"
#include "logging/log_throttle.hpp"

namespace floodgate::service::envoy {
namespace {

namespace asio = boost::asio;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using boost::system::error_code;

constexpr std::size_t chunk_bytes = 16 * 1024;

// OpenSSL's messages name neither the flag nor the file, and say little of a missing one.
void check_readable(const char* flag, const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f)
    throw config_error(std::string(flag) + " '" + path +
                       "': cannot read it: " + std::strerror(errno));
  std::fclose(f);
}

// gRPC needs HTTP/2: the client's ALPN list must offer h2 (grpc-js and Envoy do).
int select_h2(SSL*, const unsigned char** out, unsigned char* out_len, const unsigned char* in,
              unsigned int in_len, void*) {
  static const unsigned char h2[] = {2, 'h', '2'};
  unsigned char* chosen = nullptr;
  if (SSL_select_next_proto(&chosen, out_len, h2, sizeof h2, in, in_len) != OPENSSL_NPN_NEGOTIATED)
    return SSL_TLSEXT_ERR_ALERT_FATAL;
  *out = chosen;
  return SSL_TLSEXT_ERR_OK;
}

std::unique_ptr<ssl::context> make_context(const tls_files& f) {
  auto ctx = std::make_unique<ssl::context>(ssl::context::tls_server);
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                   ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
  check_readable("--grpc-tls-cert", f.cert_file);
  check_readable("--grpc-tls-key", f.key_file);
  error_code ec;
  if (ctx->use_certificate_chain_file(f.cert_file, ec); ec)
    throw config_error("--grpc-tls-cert '" + f.cert_file + "': not a PEM certificate chain (" +
                       ec.message() + ")");
  const auto not_its_key = [&] {
    return config_error("--grpc-tls-key '" + f.key_file + "' is not the key of --grpc-tls-cert '" +
                        f.cert_file + "'");
  };
  // OpenSSL compares the key with the certificate as it loads it.
  if (ctx->use_private_key_file(f.key_file, ssl::context::pem, ec); ec) {
    if (ec.category() == asio::error::get_ssl_category() &&
        ERR_GET_REASON(static_cast<unsigned long>(ec.value())) == X509_R_KEY_VALUES_MISMATCH)
      throw not_its_key();
    throw config_error("--grpc-tls-key '" + f.key_file + "': not a PEM private key (" +
                       ec.message() + ")");
  }
  if (SSL_CTX_check_private_key(ctx->native_handle()) != 1) throw not_its_key();
  if (f.ca_file.empty()) {
    ctx->set_verify_mode(ssl::verify_none);
  } else {
    check_readable("--grpc-tls-ca", f.ca_file);
    if (ctx->load_verify_file(f.ca_file, ec); ec)
      throw config_error("--grpc-tls-ca '" + f.ca_file + "': not PEM CA certificates (" +
                         ec.message() + ")");
    // Tells clients which CAs' certificates to present.
    if (auto* names = SSL_load_client_CA_file(f.ca_file.c_str()))
      SSL_CTX_set_client_CA_list(ctx->native_handle(), names);
    ctx->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
  }
  SSL_CTX_set_alpn_select_cb(ctx->native_handle(), select_h2, nullptr);
  return ctx;
}

struct handshake_failure {
  std::string peer;
  std::string error;
};

}  // namespace

class relay;

struct tls_relay::impl {
  impl(const tls_files& f, on_plain hand) : files(f), context(make_context(f)), hand_over(hand) {
    thread = std::thread([this] { io.run(); });
  }

  void note_failure(const std::string& peer, const error_code& ec);
  void flush_log();

  tls_files files;
  std::unique_ptr<ssl::context> context;
  on_plain hand_over;
  log_throttle<handshake_failure> failures{std::chrono::seconds(1)};
  // The relays alive, closed by stop(); only the relay thread touches it (and stop(), after it).
  std::unordered_map<relay*, std::weak_ptr<relay>> live;
  bool stopping = false;  // relay thread only
  asio::io_context io{1};
  std::optional<asio::steady_timer> flush_timer;
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  std::thread thread;  // last: it starts once the rest exists
};

// One client connection: the TLS side (the client's TCP socket) and the plaintext side (our end
// of the socketpair gRPC reads), a chunk at a time each way.
class relay : public std::enable_shared_from_this<relay> {
 public:
  relay(tls_relay::impl& owner, tcp::socket socket, std::string peer)
      : owner_(owner),
        tls_(std::move(socket), *owner.context),
        plain_(owner.io),
        deadline_(owner.io),
        peer_(std::move(peer)) {}
  ~relay() { owner_.live.erase(this); }

  void start() {
    owner_.live.emplace(this, weak_from_this());
    deadline_.expires_after(owner_.files.handshake_timeout);
    deadline_.async_wait([self = shared_from_this()](const error_code& ec) {
      if (!ec && !self->established_) {
        self->owner_.note_failure(self->peer_, asio::error::timed_out);
        self->close();
      }
    });
    tls_.async_handshake(
        ssl::stream_base::server,
        [self = shared_from_this()](const error_code& ec) { self->on_handshake(ec); });
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    error_code ignored;
    deadline_.cancel();
    tls_.lowest_layer().close(ignored);
    plain_.close(ignored);
  }

 private:
  void on_handshake(const error_code& ec) {
    deadline_.cancel();
    if (closed_) return;
    if (ec) {
      owner_.note_failure(peer_, ec);
      return close();
    }
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds) != 0) {
      spdlog::error("msg=\"grpc tls: socketpair failed; connection closed\" peer={} error={}",
                    quote(peer_), quote(std::strerror(errno)));
      return close();
    }
    error_code assign_error;
    plain_.assign(asio::local::stream_protocol(), fds[0], assign_error);
    if (assign_error) {
      ::close(fds[0]);
      ::close(fds[1]);
      return close();
    }
    established_ = true;
    owner_.hand_over(fds[1], peer_);
    to_grpc();
    to_client();
  }

  void to_grpc() {
    tls_.async_read_some(asio::buffer(from_client_),
                         [self = shared_from_this()](const error_code& ec, std::size_t n) {
                           if (ec) return self->close();
                           asio::async_write(self->plain_, asio::buffer(self->from_client_, n),
                                             [self](const error_code& e, std::size_t) {
                                               if (e) return self->close();
                                               self->to_grpc();
                                             });
                         });
  }

  void to_client() {
    plain_.async_read_some(asio::buffer(from_grpc_),
                           [self = shared_from_this()](const error_code& ec, std::size_t n) {
                             if (ec) return self->close();
                             asio::async_write(self->tls_, asio::buffer(self->from_grpc_, n),
                                               [self](const error_code& e, std::size_t) {
                                                 if (e) return self->close();
                                                 self->to_client();
                                               });
                           });
  }

  tls_relay::impl& owner_;
  ssl::stream<tcp::socket> tls_;
  asio::local::stream_protocol::socket plain_;
  asio::steady_timer deadline_;
  std::string peer_;
  bool established_ = false;
  bool closed_ = false;
  std::array<char, chunk_bytes> from_client_{};
  std::array<char, chunk_bytes> from_grpc_{};
};

void tls_relay::impl::note_failure(const std::string& peer, const error_code& ec) {
  const auto now = std::chrono::steady_clock::now();
  const auto d = failures.on_event(now, handshake_failure{peer, ec.message()});
  if (d.log)
    spdlog::warn(
        "msg=\"grpc tls handshake failed; connection closed\" peer={} error={} "
        "more_since_last_line={}",
        quote(peer), quote(ec.message()), d.suppressed);
  if (d.flush_at) {
    flush_timer.emplace(io, *d.flush_at);
    flush_timer->async_wait([this](const error_code& e) {
      if (!e) flush_log();
    });
  }
}

void tls_relay::impl::flush_log() {
  if (const auto s = failures.on_flush(std::chrono::steady_clock::now()))
    spdlog::warn(
        "msg=\"grpc tls handshakes failed, not logged since the last line\" count={} "
        "last_peer={} last_error={}",
        s->count, quote(s->last.peer), quote(s->last.error));
}

tls_relay::tls_relay(const tls_files& files, on_plain hand_over)
    : impl_(std::make_unique<impl>(files, std::move(hand_over))) {}

tls_relay::~tls_relay() {
  stop();
}

void tls_relay::adopt(int fd, std::string peer) {
  asio::post(impl_->io, [i = impl_.get(), fd, peer = std::move(peer)]() mutable {
    if (i->stopping) {
      ::close(fd);
      return;
    }
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    error_code ec;
    tcp::socket socket(i->io);
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0 ||
        (socket.assign(local.ss_family == AF_INET6 ? tcp::v6() : tcp::v4(), fd, ec), ec)) {
      ::close(fd);
      return;
    }
    std::make_shared<relay>(*i, std::move(socket), std::move(peer))->start();
  });
}

void tls_relay::stop() {
  if (!impl_->thread.joinable()) return;
  // On the relay thread: close every connection; their pending operations end (aborted), the
  // work guard goes, and run() returns once nothing is left.
  asio::post(impl_->io, [i = impl_.get()] {
    i->stopping = true;
    std::vector<std::shared_ptr<relay>> open;
    for (auto& [ptr, weak] : i->live)
      if (auto r = weak.lock()) open.push_back(std::move(r));
    for (auto& r : open) r->close();
    if (i->flush_timer) i->flush_timer->cancel();
    i->flush_log();
    i->work.reset();
  });
  impl_->thread.join();
}

}  // namespace floodgate::service::envoy
