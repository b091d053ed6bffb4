// The real floodgated binary, started for a test: a temp dir with its rules file, a free port
// (it listens on port 0 and we read the port from its "listening" log line), stderr captured.
//
//   floodgated_process fg(R"(rules: [...])");      // waits until it serves
//   http_request_once(fg.port(), "GET", "/healthz");
//   fg.write_rules("..."); fg.signal(SIGHUP); fg.wait_for_log("config reloaded");
//   fg.signal(SIGTERM); EXPECT_EQ(fg.wait_exit(), 0);
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "child_process.hpp"

namespace floodgate::test {

class floodgated_process {
 public:
  struct options {
    std::vector<std::string> extra_args;  // e.g. {"--redis", url}
    std::string log_level = "info";
    bool wait_until_serving = true;
    int max_open_files = 0;  // RLIMIT_NOFILE for the process; 0 leaves it alone
    bool rules_file = true;  // false: no --config (the rules come from extra_args)
  };

  explicit floodgated_process(const std::string& rules_yaml)
      : floodgated_process(rules_yaml, options{}) {}
  floodgated_process(const std::string& rules_yaml, options opts);
  // SIGTERM if still running (SIGKILL after 5 s), fails the test if the log holds a sanitizer
  // report, then removes the temp dir.
  ~floodgated_process();
  floodgated_process(const floodgated_process&) = delete;
  floodgated_process& operator=(const floodgated_process&) = delete;

  std::uint16_t port() const { return port_; }
  pid_t pid() const { return process_.pid(); }
  const std::string& rules_path() const { return rules_path_; }

  void write_rules(const std::string& yaml) const;
  void signal(int signo) const;
  // The exit code, or nullopt if it is still running after `within` (killed by a signal: 128+n).
  std::optional<int> wait_exit(std::chrono::milliseconds within = std::chrono::seconds(10));
  std::string log() const;
  // The port `--grpc-listen HOST:0` was given, from the "grpc listening" log line; throws with
  // the log when there is none.
  std::uint16_t grpc_port() const;
  // Waits until the log holds `text` (after position `from`); true if it appeared.
  bool wait_for_log(const std::string& text,
                    std::chrono::milliseconds within = std::chrono::seconds(5),
                    std::size_t from = 0) const;

 private:
  std::string dir_;
  std::string rules_path_;
  std::string log_path_;
  child_process process_;
  std::uint16_t port_ = 0;
};

// Events a throttled log line family reported (lines whose msg starts with `what`): one per
// event line plus the more_since_last_line=N it carries, and a summary line's count=N.
long throttled_events(const std::string& log, const std::string& what);

// The head of the first sanitizer report (ASan, LSan, UBSan, TSan) in a log; empty: none.
std::string sanitizer_report(const std::string& log);

// Runs floodgated with `args` to completion (for --help, bad flags, bad configs): exit code and
// everything it wrote to stdout and stderr. A sanitizer report in it fails the test.
struct run_result {
  int exit_code = -1;
  std::string output;
};
run_result run_floodgated(const std::vector<std::string>& args,
                          std::chrono::milliseconds within = std::chrono::seconds(10));

}  // namespace floodgate::test
