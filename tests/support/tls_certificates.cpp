#include "tls_certificates.hpp"

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include "child_process.hpp"

namespace floodgate::test {

tls_certificates::tls_certificates() : dir_(make_temp_dir("floodgate-tls-")) {
  // EC keys: fast to make, and Redis serves them as well as RSA.
  const std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  const std::string sign = "openssl x509 -req -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 ";
  const std::string script =
      "set -e; cd '" + dir_ + "'; exec 2>openssl.log; " + "openssl req -x509 " + key +
      " -keyout ca.key -out ca.crt -days 2 -subj '/CN=test CA'; " + "openssl req -x509 " + key +
      " -keyout other.key -out other.crt -days 2 -subj '/CN=other'; " + "openssl req " + key +
      " -keyout server.key -out server.csr -subj '/CN=localhost'; " +
      "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' >san.ext; " + sign +
      "-in server.csr -extfile san.ext -out server.crt; " + "openssl req " + key +
      " -keyout client.key -out client.csr -subj '/CN=client'; " + sign +
      "-in client.csr -out client.crt";
  if (std::system(script.c_str()) != 0)
    throw std::runtime_error("openssl failed; see " + dir_ + "/openssl.log");
}

tls_certificates::~tls_certificates() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string tls_certificates::client_query() const {
  return "tls_ca_file=" + path("ca.crt") + "&tls_cert_file=" + path("client.crt") +
         "&tls_key_file=" + path("client.key");
}

std::vector<std::string> tls_certificates::server_args(std::uint16_t tls_port) const {
  return {"--tls-port",     std::to_string(tls_port), "--tls-cert-file",    path("server.crt"),
          "--tls-key-file", path("server.key"),       "--tls-ca-cert-file", path("ca.crt")};
}

}  // namespace floodgate::test
