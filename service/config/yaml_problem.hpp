// What a file's YAML parse error says, for both config parsers (rules and Envoy): yaml-cpp's own
// text, except where that text misleads. Nesting past its depth guard (500 levels in this
// yaml-cpp) reads "bad file", which sends an operator looking at the file's path or encoding.
#pragma once

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/exceptions.h>

#include <string>

namespace floodgate::service {

inline std::string yaml_problem(const YAML::ParserException& e) {
  if (const auto* deep = dynamic_cast<const YAML::DeepRecursion*>(&e))
    return "invalid YAML: nested deeper than the parser allows (" +
           std::to_string(deep->depth()) + " levels)";
  return "invalid YAML: " + e.msg;
}

}  // namespace floodgate::service
