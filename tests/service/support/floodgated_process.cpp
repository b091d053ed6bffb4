#include "floodgated_process.hpp"

#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

namespace floodgate::test {

using namespace std::chrono_literals;

namespace {

// floodgated with `args`, its stdout and stderr in `log_path`.
child_process spawn(const std::vector<std::string>& args, const std::string& log_path,
                    int max_open_files = 0) {
  std::vector<std::string> argv = {FLOODGATED_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  child_process::options o;
  o.output = log_path;
  o.max_open_files = max_open_files;
  return child_process(argv, o);
}

}  // namespace

std::string sanitizer_report(const std::string& log) {
  for (const char* mark : {"ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                           "WARNING: ThreadSanitizer"}) {
    const auto at = log.find(mark);
    if (at == std::string::npos) continue;
    const auto line = log.rfind('\n', at);
    const auto from = line == std::string::npos ? 0 : line + 1;
    return log.substr(from, 4000);  // the report's head: the error and its first stacks
  }
  return {};
}

floodgated_process::floodgated_process(const std::string& rules_yaml, options opts)
    : dir_(make_temp_dir("floodgated-test-")),
      rules_path_(dir_ + "/rules.yaml"),
      log_path_(dir_ + "/floodgated.log") {
  write_rules(rules_yaml);
  std::vector<std::string> args = {"--listen", "127.0.0.1:0", "--log-level", opts.log_level};
  if (opts.rules_file) args.insert(args.begin(), {"--config", rules_path_});
  args.insert(args.end(), opts.extra_args.begin(), opts.extra_args.end());
  process_ = spawn(args, log_path_, opts.max_open_files);
  if (!opts.wait_until_serving) return;
  // The port it picked, from its "listening" log line.
  const auto started = process_.wait_ready(
      [&] {
        const auto text = log();
        const auto at = text.find("msg=\"listening\"");
        const auto p = at == std::string::npos ? at : text.find(" port=", at);
        if (p == std::string::npos) return false;
        port_ = static_cast<std::uint16_t>(std::stoi(text.substr(p + 6)));
        return true;
      },
      10s);
  if (started == child_process::readiness::exited)
    throw std::runtime_error("floodgated exited at start:\n" + log());
  if (started == child_process::readiness::timed_out)
    throw std::runtime_error("floodgated did not start listening within 10 s:\n" + log());
}

floodgated_process::~floodgated_process() {
  // Stopped as an operator stops it, so that its shutdown path runs in every test (and under the
  // sanitizer lane, its destructors and the leak check at exit): a SIGKILL skipped both, and a
  // report they gave was never seen. SIGTERM closes idle connections at once; one still busy
  // holds the drain, so after a bound well inside the 10 s drain it is killed after all.
  if (process_.pid() > 0) {
    process_.signal(SIGTERM);
    if (!process_.wait_exit(5s)) process_.kill();
  }
  // Whenever it happened (a report ends the process: -fno-sanitize-recover), a test whose
  // floodgated hit a sanitizer error fails, with the report, even if its own checks passed.
  if (const auto report = sanitizer_report(log()); !report.empty())
    ADD_FAILURE() << "floodgated (" << log_path_ << ") gave a sanitizer report:\n" << report;
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

void floodgated_process::write_rules(const std::string& yaml) const {
  // Write then rename, so a reload never reads half a file.
  const auto tmp = rules_path_ + ".tmp";
  std::ofstream(tmp, std::ios::binary | std::ios::trunc) << yaml;
  std::filesystem::rename(tmp, rules_path_);
}

void floodgated_process::signal(int signo) const {
  process_.signal(signo);
}

std::optional<int> floodgated_process::wait_exit(std::chrono::milliseconds within) {
  return process_.wait_exit(within);
}

std::string floodgated_process::log() const {
  return read_file(log_path_);
}

std::uint16_t floodgated_process::grpc_port() const {
  const auto text = log();
  const auto at = text.find("msg=\"grpc listening\"");
  if (at == std::string::npos) throw std::runtime_error("no grpc listening line:\n" + text);
  return static_cast<std::uint16_t>(std::stoi(text.substr(text.find(" port=", at) + 6)));
}

bool floodgated_process::wait_for_log(const std::string& text, std::chrono::milliseconds within,
                                      std::size_t from) const {
  const auto deadline = std::chrono::steady_clock::now() + within;
  do {
    if (log().find(text, from) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  } while (std::chrono::steady_clock::now() < deadline);
  return false;
}

long throttled_events(const std::string& log, const std::string& what) {
  long total = 0;
  std::size_t at = 0;
  while ((at = log.find("msg=\"" + what, at)) != std::string::npos) {
    const auto eol = log.find('\n', at);
    const auto line = log.substr(at, eol - at);
    at = eol;
    if (const auto m = line.find(" more_since_last_line="); m != std::string::npos)
      total += 1 + std::stol(line.substr(m + 22));
    else if (const auto c = line.find(" count="); c != std::string::npos)
      total += std::stol(line.substr(c + 7));
  }
  return total;
}

run_result run_floodgated(const std::vector<std::string>& args, std::chrono::milliseconds within) {
  const auto dir = make_temp_dir("floodgated-run-");
  const auto log_path = dir + "/out.log";
  auto process = spawn(args, log_path);
  run_result r;
  r.exit_code = process.wait_exit(within).value_or(-1);  // still running: killed on return
  process.kill();
  r.output = read_file(log_path);
  if (const auto report = sanitizer_report(r.output); !report.empty())
    ADD_FAILURE() << "floodgated gave a sanitizer report:\n" << report;
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return r;
}

}  // namespace floodgate::test
