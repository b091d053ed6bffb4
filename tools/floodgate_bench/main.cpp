// floodgate-bench: load and accuracy tool. See options.cpp's usage() or --help.
//
// Exit codes: 0 the run completed (errors, if any, are in the report), 1 the run could not be
// made (target unreachable, a worker failed), 2 bad command line, 130 interrupted.
#include <cstdio>
#include <exception>
#include <iostream>
#include <optional>

#include "accuracy.hpp"
#include "held_board.hpp"
#include "options.hpp"
#include "print_script.hpp"
#include "progress_bar.hpp"
#include "replay.hpp"
#include "report.hpp"
#include "supervisor.hpp"

int main(int argc, char** argv) {
  using namespace floodgate::bench;
  bench_options opts;
  try {
    opts = parse_options(argc, argv);
  } catch (const usage_error& e) {
    std::fprintf(stderr, "floodgate-bench: %s\n", e.what());
    return 2;
  }
  if (opts.help) {
    std::cout << usage();
    return 0;
  }
  if (opts.print_script) return print_script(*opts.print_script);
  if (opts.print_library) return print_library();

  try {
    const auto policy = opts.make_policy();
    progress_bar bar(opts.progress && !opts.json);
    std::optional<held_board> held;
    if (opts.concurrency) held.emplace(opts.keys);  // before fork: the workers share it
    auto result = supervise(
        opts, [&](double f, std::uint64_t n) { bar.update(f, n); }, held ? &*held : nullptr);
    bar.clear();
    const auto accuracy = check_accuracy(policy, std::move(result.admissions));
    std::optional<replay_report> replayed, own;
    if (opts.replay) {
      const auto in_order =
          in_judging_order(std::move(result.decision_log), result.decision_log_cutoff_ms);
      own = replay_own_definition_and_bound(policy, in_order);
      replayed = replay_sliding_log(policy.limit(), policy.window().count(), in_order);
      // Decisions never recorded are unjudged too.
      own->unjudged = result.decisions() - own->judged;
      replayed->unjudged = result.decisions() - replayed->judged;
    }
    const report r{
        opts, policy, result, accuracy, replayed, held ? &*held : nullptr, own ? &*own : nullptr};
    std::cout << (opts.json ? r.json() + "\n" : r.text()) << std::flush;
    return 0;
  } catch (const interrupted& e) {
    std::fprintf(stderr, "\nfloodgate-bench: %s\n", e.what());
    return 130;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "floodgate-bench: %s\n", e.what());
    return 1;
  }
}
