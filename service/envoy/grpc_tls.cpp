#include "grpc_tls.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <spdlog/spdlog.h>

#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "floodgate/errors.hpp"
#include "logging/log_format.hpp"

namespace floodgate::service::envoy {
namespace {

namespace asio = boost::asio;
namespace ssl = asio::ssl;
using boost::system::error_code;

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

}  // namespace

std::shared_ptr<ssl::context> make_grpc_tls_context(const tls_files& f) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
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

void tls_failure_log::note(const std::string& peer, const std::string& error) {
  const auto d = throttle_.on_event(std::chrono::steady_clock::now(), failure{peer, error});
  if (d.log)
    spdlog::warn(
        "msg=\"grpc tls handshake failed; connection closed\" peer={} error={} "
        "more_since_last_line={}",
        quote(peer), quote(error), d.suppressed);
  if (d.flush_at) flush_at_ns_ = d.flush_at->time_since_epoch().count();
}

void tls_failure_log::flush(bool force) {
  const auto at = flush_at_ns_.load();
  const auto now = std::chrono::steady_clock::now();
  if (!force && (at == 0 || now.time_since_epoch().count() < at)) return;
  flush_at_ns_ = 0;
  if (const auto s = throttle_.on_flush(now))
    spdlog::warn(
        "msg=\"grpc tls handshakes failed, not logged since the last line\" count={} "
        "last_peer={} last_error={}",
        s->count, quote(s->last.peer), quote(s->last.error));
}

}  // namespace floodgate::service::envoy
