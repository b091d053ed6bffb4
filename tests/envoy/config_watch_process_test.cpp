// floodgated --envoy-config-watch: a Kubernetes ConfigMap update (new data directory, `..data`
// symlink renamed over, old directory removed) reloads the Envoy config as SIGHUP does, once per
// burst; a bad new file keeps the last good config and is logged with file:line.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "rls_process.hpp"

namespace floodgate::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// The ConfigMap volume's layout: DIR/edge.yaml -> ..data/edge.yaml, ..data -> ..<version>.
class configmap_dir {
 public:
  explicit configmap_dir(std::string dir) : dir_(std::move(dir)) { fs::create_directories(dir_); }
  // Kubernetes' atomic update: the new version's directory, a `..data_tmp` symlink to it
  // renamed over `..data`, the file symlink (first time only), the old version removed.
  void publish(const std::string& yaml) {
    const auto version = "..v" + std::to_string(++version_);
    fs::create_directory(dir_ + "/" + version);
    write_file(dir_ + "/" + version + "/edge.yaml", yaml);
    fs::create_symlink(version, dir_ + "/..data_tmp");
    fs::rename(dir_ + "/..data_tmp", dir_ + "/..data");
    if (!fs::is_symlink(dir_ + "/edge.yaml"))
      fs::create_symlink("..data/edge.yaml", dir_ + "/edge.yaml");
    if (version_ > 1) fs::remove_all(dir_ + "/..v" + std::to_string(version_ - 1));
  }
  const std::string& path() const { return dir_; }

 private:
  std::string dir_;
  int version_ = 0;
};

const char* blocked_yaml = R"(
domain: edge
descriptors:
  - key: remote_address
    value: 50.0.0.5
    rate_limit: {unit: second, requests_per_unit: 0}
)";
const char* open_yaml = R"(
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 1000}
)";

std::string code_for(const std::string& address, const std::string& dir) {
  const auto in = dir + "/calls.json", out = dir + "/results.json", err = dir + "/client.err";
  write_file(in, json::serialize(json::array{check(request_of({{"remote_address", "50.0.0.5"}}))}));
  if (std::system(node_command(address, in, out, err).c_str()) != 0)
    throw std::runtime_error("the Node client failed:\n" + read_file(err));
  return std::string(
      response(json::parse(read_file(out)).as_array(), 0).at("overall_code").as_string());
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(config_watch_process, a_configmap_swap_reloads_once_and_a_bad_file_keeps_the_last_good) {
  const auto root = make_temp_dir("floodgate-watch-");
  configmap_dir config(root + "/config");
  config.publish(blocked_yaml);
  floodgated_process fg("rules:\n  - {name: unused, algorithm: gcra, limit: 1, window: 1s}\n",
                        {.extra_args = {"--grpc-listen", "127.0.0.1:0", "--envoy-config",
                                        config.path(), "--envoy-config-watch"}});
  const auto address = "127.0.0.1:" + std::to_string(fg.grpc_port());
  EXPECT_EQ(code_for(address, root), "OVER_LIMIT");

  auto from = fg.log().size();
  config.publish(open_yaml);
  ASSERT_TRUE(fg.wait_for_log("envoy config reloaded", 5s, from)) << fg.log();
  EXPECT_EQ(code_for(address, root), "OK");
  // The swap's several events (create, rename, delete) were one reload: wait past the quiet
  // time (200 ms) twice over for a second one.
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(count(fg.log().substr(from), "envoy config reloaded"), 1u) << fg.log();

  from = fg.log().size();
  config.publish("domain: edge\ndescriptors:\n  - key: remote_address\n    unlimied: true\n");
  ASSERT_TRUE(fg.wait_for_log("envoy config reload rejected", 5s, from)) << fg.log();
  EXPECT_NE(fg.log().find("edge.yaml:4"), std::string::npos) << fg.log();
  EXPECT_EQ(code_for(address, root), "OK");  // the last good config stays
  fs::remove_all(root);
}

TEST(config_watch_process, a_swap_of_a_symlink_on_the_way_reloads) {
  // Upstream's RUNTIME_ROOT=/srv/runtime_data/current, `current` a symlink to a release.
  const auto root = make_temp_dir("floodgate-watch-");
  for (const auto* v : {"v1", "v2"}) fs::create_directories(root + "/" + v + "/ratelimit/config");
  write_file(root + "/v1/ratelimit/config/edge.yaml", blocked_yaml);
  write_file(root + "/v2/ratelimit/config/edge.yaml", open_yaml);
  fs::create_symlink("v1", root + "/current");
  floodgated_process fg(
      "rules:\n  - {name: unused, algorithm: gcra, limit: 1, window: 1s}\n",
      {.extra_args = {"--grpc-listen", "127.0.0.1:0", "--envoy-config",
                      root + "/current/ratelimit/config", "--envoy-config-watch"}});
  const auto address = "127.0.0.1:" + std::to_string(fg.grpc_port());
  EXPECT_EQ(code_for(address, root), "OVER_LIMIT");
  const auto from = fg.log().size();
  fs::create_symlink("v2", root + "/current.tmp");
  fs::rename(root + "/current.tmp", root + "/current");
  ASSERT_TRUE(fg.wait_for_log("envoy config reloaded", 5s, from)) << fg.log();
  EXPECT_EQ(code_for(address, root), "OK");
  fs::remove_all(root);
}

TEST(config_watch_process, without_the_flag_a_change_is_not_reloaded) {
  const auto root = make_temp_dir("floodgate-watch-");
  configmap_dir config(root + "/config");
  config.publish(blocked_yaml);
  floodgated_process fg(
      "rules:\n  - {name: unused, algorithm: gcra, limit: 1, window: 1s}\n",
      {.extra_args = {"--grpc-listen", "127.0.0.1:0", "--envoy-config", config.path()}});
  const auto from = fg.log().size();
  config.publish(open_yaml);
  EXPECT_FALSE(fg.wait_for_log("envoy config reloaded", 1s, from)) << fg.log();
  fs::remove_all(root);
}

}  // namespace
}  // namespace floodgate::test
