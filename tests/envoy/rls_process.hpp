// floodgated with the Envoy API for the gRPC tests, and the Node client (@grpc/grpc-js) that
// drives it: rls_client.js, one process a batch of calls, results as JSON.
//
//   rls_process p(redis.url());   // or "" for the memory backend; waits until /readyz is 200
//   auto results = run_client(p, {check(request_of({{"remote_address", "a"}}))});
//   response(results, 0).at("overall_code") == "OK"
#pragma once

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "floodgated_process.hpp"
#include "http_client.hpp"

namespace floodgate::test {

namespace json = boost::json;

inline const char* envoy_yaml = R"(
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 30}
  - key: path
    value: /api
    rate_limit: {unit: minute, requests_per_unit: 1000, name: api}
  - key: path
    value: /open
    rate_limit: {unit: minute, requests_per_unit: 5, failure_mode: open}
  - key: tenant
    descriptors:
      - key: plan
        value: paid
        rate_limit: {unlimited: true}
  - key: remote_address
    value: 50.0.0.5
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: path
    value: /files/*/raw
    share_threshold: True
    rate_limit: {unit: minute, requests_per_unit: 2}
)";

inline void write_file(const std::string& path, const std::string& text) {
  const auto tmp = path + ".tmp";
  std::ofstream(tmp, std::ios::binary | std::ios::trunc) << text;
  std::filesystem::rename(tmp, path);
}

// Whether rls_process waits for /readyz before its first call.
enum class wait_ready { yes, no };

// floodgated with the Envoy API on a free port, the config in its own temp dir. A backend URL
// without a query gets a generous call timeout: a loaded machine must not make a slow call a
// backend error (tests of failures give their own).
class rls_process {
 public:
  explicit rls_process(const std::string& backend_url, std::vector<std::string> extra = {},
                       wait_ready ready = wait_ready::yes)
      : dir_(make_temp_dir("floodgate-rls-")), config_(dir_ + "/edge.yaml") {
    write_file(config_, envoy_yaml);
    floodgated_process::options o;
    o.extra_args = {"--grpc-listen", "127.0.0.1:0", "--envoy-config", config_};
    if (!backend_url.empty())
      o.extra_args.insert(o.extra_args.end(), {"--redis", backend_url.find('?') == std::string::npos
                                                              ? backend_url + "?timeout=2s"
                                                              : backend_url});
    o.extra_args.insert(o.extra_args.end(), extra.begin(), extra.end());
    fg_ = std::make_unique<floodgated_process>(
        "rules:\n  - {name: unused, algorithm: gcra, limit: 1, window: 1s}\n", o);
    grpc_port_ = fg_->grpc_port();
    if (ready == wait_ready::no) return;
    // Connected to the backend (it connects in the background) before the first call.
    for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
         http_request_once(fg_->port(), "GET", "/readyz").status != 200;) {
      if (std::chrono::steady_clock::now() > deadline)
        throw std::runtime_error("floodgated not ready:\n" + fg_->log());
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  ~rls_process() {
    fg_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  std::string address() const { return "127.0.0.1:" + std::to_string(grpc_port_); }
  floodgated_process& fg() { return *fg_; }
  const std::string& config_path() const { return config_; }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  std::string config_;
  std::unique_ptr<floodgated_process> fg_;
  int grpc_port_ = 0;
};

// `client_args`: rls_client.js's options after the address (--tls-ca FILE ...), each quoted.
inline std::string node_command(const std::string& address, const std::string& in,
                                const std::string& out, const std::string& err,
                                const std::vector<std::string>& client_args = {}) {
  std::string args;
  for (const auto& a : client_args) args += " '" + a + "'";
  return "NODE_PATH='" FLOODGATE_NODE_MODULES "' node '" FLOODGATE_SOURCE_DIR
         "/tests/envoy/rls_client.js' " +
         address + args + " < '" + in + "' > '" + out + "' 2> '" + err + "'";
}

// Runs the Node client on `calls` (a JSON array, see rls_client.js) and returns its results.
// `p`: an rls_process, or anything else with address() and a scratch dir().
template <class Process>
json::array run_client(const Process& p, const json::array& calls,
                       const std::vector<std::string>& client_args = {}) {
  const auto in = p.dir() + "/calls.json", out = p.dir() + "/results.json",
             err = p.dir() + "/client.err";
  write_file(in, json::serialize(calls));
  const int rc = std::system(node_command(p.address(), in, out, err, client_args).c_str());
  if (rc != 0) throw std::runtime_error("the Node client failed:\n" + read_file(err));
  return json::parse(read_file(out)).as_array();
}

inline json::object request_of(
    std::initializer_list<std::pair<const char*, const char*>> descriptors, std::int64_t hits = 0) {
  json::array ds;
  for (const auto& [k, v] : descriptors)
    ds.push_back(json::object{{"entries", json::array{json::object{{"key", k}, {"value", v}}}}});
  json::object r{{"domain", "edge"}, {"descriptors", ds}};
  if (hits) r["hits_addend"] = hits;
  return r;
}

inline json::object check(json::object req, int parallel = 1) {
  return json::object{{"check", std::move(req)}, {"parallel", parallel}};
}

// The first copy's response of call `i`.
inline const json::object& response(const json::array& results, std::size_t i) {
  const auto& r = results.at(i).as_array().at(0).as_object();
  if (!r.contains("ok")) throw std::runtime_error("call failed: " + json::serialize(r));
  return r.at("ok").as_object();
}

}  // namespace floodgate::test
