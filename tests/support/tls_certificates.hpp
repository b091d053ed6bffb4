// Certificates for TLS tests, made by the openssl tool in a scratch directory: a CA, a server
// certificate for 127.0.0.1 and localhost signed by it, a client certificate signed by it, and
// an unrelated CA. Removed with the object.
//
//   tls_certificates certs;
//   redis-server --tls-cert-file certs.path("server.crt") --tls-key-file certs.path("server.key")
//                --tls-ca-cert-file certs.path("ca.crt") ...
//   "rediss://...?" + certs.client_query()     // tls_ca_file, tls_cert_file, tls_key_file
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace floodgate::test {

class tls_certificates {
 public:
  tls_certificates();  // throws if openssl fails
  ~tls_certificates();
  tls_certificates(const tls_certificates&) = delete;
  tls_certificates& operator=(const tls_certificates&) = delete;

  // ca.crt/.key, other.crt/.key, server.crt/.key, client.crt/.key
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  // URL options for a client that trusts the CA and presents the client certificate.
  std::string client_query() const;
  // redis-server arguments serving TLS on `tls_port` with the server certificate, requiring
  // client certificates from the CA.
  std::vector<std::string> server_args(std::uint16_t tls_port) const;

 private:
  std::string dir_;
};

}  // namespace floodgate::test
