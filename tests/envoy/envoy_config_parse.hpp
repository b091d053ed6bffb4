// Envoy config text parsed as floodgated loads a file named edge.yaml, for the config tests.
#pragma once

#include <map>
#include <string>

#include "envoy_config.hpp"
#include "floodgate/errors.hpp"

namespace floodgate::service::envoy::config_text {

inline envoy_config parse(const std::string& text) {
  std::map<std::string, domain_config, std::less<>> domains;
  parse_envoy_domain(text, "edge.yaml", domains);
  return envoy_config(std::move(domains));
}

// The load error's text, or "(loaded)".
inline std::string error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const config_error& e) {
    return e.what();
  }
  return "(loaded)";
}

}  // namespace floodgate::service::envoy::config_text
