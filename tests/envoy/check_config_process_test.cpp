// `floodgate check-config --envoy PATH...` judges Envoy configs as floodgated's --envoy-config
// loads them: the same loader, the same FILE:LINE messages, check-config's exit codes (0 ok,
// 1 a bad config, 2 usage).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "child_process.hpp"
#include "inspect_helpers.hpp"

namespace floodgate::test {
namespace {

namespace fs = std::filesystem;

struct temp_dir {
  temp_dir() : path(make_temp_dir("floodgate-check-envoy-")) {}
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& name, const std::string& text) const {
    const auto p = path + "/" + name;
    std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
    return p;
  }
  std::string path;
};

TEST(check_config_envoy, upstream_configs_pass) {
  const std::string dir = FLOODGATE_SOURCE_DIR "/tests/envoy/upstream_configs";
  auto r = run_floodgate_cli({"check-config", "--envoy", dir});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(dir + ": ok (11 domains, "), std::string::npos) << r.output;

  // Files and directories together, as --envoy-config takes them (repeatable).
  temp_dir d;
  const auto one = d.file("one.yaml",
                          "domain: one\ndescriptors:\n  - key: a\n"
                          "    rate_limit: {unit: second, requests_per_unit: 0}\n");
  r = run_floodgate_cli({"check-config", "--envoy", one, dir});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("ok (12 domains, "), std::string::npos) << r.output;
}

// Upstream's #653: a misspelt key must not pass; the message is floodgated's, word for word.
TEST(check_config_envoy, a_typo_fails_with_floodgateds_message) {
  temp_dir d;
  const auto typo = d.file("edge.yaml",
                           "domain: edge\ndescriptors:\n  - key: remote_address\n"
                           "    rate_limit: {unlimied: true}\n");
  const auto r = run_floodgate_cli({"check-config", "--envoy", typo});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const std::string message =
      typo + ":4: descriptor 'remote_address': rate_limit: unknown field 'unlimied'";
  EXPECT_NE(r.output.find("floodgate: " + message), std::string::npos) << r.output;
  const auto fg = run_floodgated({"--envoy-config", typo, "--listen", "127.0.0.1:0"});
  EXPECT_EQ(fg.exit_code, 1) << fg.output;
  EXPECT_NE(fg.output.find(message), std::string::npos) << fg.output;

  // The same for a directory holding it.
  EXPECT_EQ(run_floodgate_cli({"check-config", "--envoy", d.path}).exit_code, 1);
}

TEST(check_config_envoy, what_floodgated_refuses_across_files_fails) {
  temp_dir d;
  const std::string yaml =
      "domain: edge\ndescriptors:\n  - key: a\n"
      "    rate_limit: {unit: minute, requests_per_unit: 5}\n";
  const auto a = d.file("a.yaml", yaml);
  const auto b = d.file("b.yaml", yaml);
  EXPECT_EQ(run_floodgate_cli({"check-config", "--envoy", a}).exit_code, 0);
  auto r = run_floodgate_cli({"check-config", "--envoy", a, b});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(b + ":1: duplicate domain 'edge' (also in " + a + ")"), std::string::npos)
      << r.output;

  r = run_floodgate_cli({"check-config", "--envoy", d.path + "/missing.yaml"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(d.path + "/missing.yaml"), std::string::npos) << r.output;
}

TEST(check_config_envoy, usage_errors_exit_2) {
  EXPECT_EQ(run_floodgate_cli({"check-config", "--envoy"}).exit_code, 2);
  EXPECT_EQ(run_floodgate_cli({"check-config", "--envoy", "x.yaml", "--cluster"}).exit_code, 2);
  EXPECT_EQ(run_floodgate_cli({"check-config", "a.yaml", "b.yaml"}).exit_code, 2);
}

}  // namespace
}  // namespace floodgate::test
