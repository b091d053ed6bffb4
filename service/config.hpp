// floodgated's configuration: the rules it enforces, loaded from a YAML file.
//
//   rules:
//     - name: api
//       algorithm: sliding_log   # or sliding_window, fixed_window, token_bucket, gcra
//       limit: 100
//       window: 60s              # ms, s, m, h
//       burst: 20                # token_bucket and gcra only
//       failure_mode: open       # open | closed (default: closed)
//       key: header:X-Api-Key    # for /v1/auth: header:NAME or remote_addr (default)
//
//   auto cfg = floodgate::service::load_config("rules.yaml");  // throws config_error
//   if (const rule* r = cfg.find("api")) ...
//
// A bad file throws config_error naming the file, the line and the problem, e.g.
// "rules.yaml:7: rule 'api': limit must be at least 1 (got 0)". Loading happens at start-up
// and on SIGHUP, never on the request path.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "floodgate/policy.hpp"

namespace floodgate::service {

// Where /v1/auth/{rule} takes a rule's key from.
struct key_source {
  enum class kind {
    remote_addr,  // X-Real-IP when present (set it in the proxy), else the TCP peer
    header,       // the value of the request header `header`
  };
  kind from = kind::remote_addr;
  std::string header;  // kind::header only: the name as written in the file

  std::string describe() const;  // "remote_addr" or "header:X-Api-Key", as in the file
};

struct rule {
  floodgate::policy policy;
  key_source key;

  const std::string& name() const noexcept { return policy.name(); }
};

class config {
 public:
  config() = default;
  explicit config(std::vector<rule> rules) : rules_(std::move(rules)) {}

  const rule* find(std::string_view name) const noexcept;
  const std::vector<rule>& rules() const noexcept { return rules_; }

 private:
  std::vector<rule> rules_;
};

// Reads and validates `path`; messages name the file as given.
config load_config(const std::string& path);
// Validates YAML text; `file_name` is only used in messages.
config parse_config(std::string_view text, std::string_view file_name);

}  // namespace floodgate::service
