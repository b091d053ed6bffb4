// floodgate rules push|show|history|rollback (rules_commands.hpp).
#include "cli/rules_commands.hpp"

#include <charconv>
#include <cstdio>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/line_diff.hpp"
#include "config/config.hpp"
#include "config/config_file.hpp"
#include "cli/subcommands.hpp"
#include "rules/rules_store.hpp"

namespace floodgate::service {
namespace {

using namespace cli;

using namespace std::chrono_literals;

constexpr const char* rules_usage =
    R"(usage: floodgate rules push FILE --to URL#NAME (--base N | --force) [--cluster]
       floodgate rules show URL#NAME [--version N]
       floodgate rules history URL#NAME
       floodgate rules rollback URL#NAME --to N [--cluster]

  push      validate FILE as floodgated does (FILE:LINE errors), print the diff against the
            version in force, and store it as the next version, which every floodgated
            --rules-from URL#NAME applies within 1 s. --base N: the version FILE was made
            from (as `show` printed it); refused when another version is in force by then,
            so two operators never overwrite each other silently. Not needed for the first
            push. --force: push over whatever is in force. --cluster: validate with Redis
            Cluster's rule (implied by a redis+cluster URL).
  show      the version in force (or N, while in the history), with who pushed it and when.
  history   the versions kept (the last 20), newest first; * marks the one in force.
  rollback  a new version whose text is version N's (validated, the diff printed).
)";

std::int64_t parse_version(std::string_view flag, std::string_view v, std::int64_t min) {
  std::int64_t n = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc{} || end != v.data() + v.size() || n < min)
    usage(std::string(flag) + ": '" + std::string(v) + "' is not a version number");
  return n;
}

std::string when(std::int64_t at_ms) {
  const std::time_t t = at_ms / 1000;
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string version_name(const rules_ref& r, std::int64_t v) {
  return r.name + "@v" + std::to_string(v);
}

placement placement_for(const rules_ref& r, bool cluster) {
  const bool cluster_url =
      r.url.starts_with("redis+cluster:") || r.url.starts_with("rediss+cluster:");
  return cluster || cluster_url ? placement::one_key_per_group : placement::any;
}

void check_store(const rules_store& s) {
  if (!s.why_not().empty()) fail(s.ref().describe() + ": " + s.why_not());
}

rules_version read_head(rules_store& s) {
  std::string error;
  auto head = s.head(error);
  if (!head) fail(s.ref().describe() + ": cannot read: " + error);
  return *head;
}

// The diff against what is in force, then the push; prints what happened.
int push_text(rules_store& s, const rules_version& head, const std::string& text,
              const std::string& text_name, std::optional<std::int64_t> base,
              const std::string& note) {
  const auto& r = s.ref();
  if (head.version != 0 && head.text == text && base) {
    std::printf("%s: unchanged (the same text as %s); nothing pushed\n", text_name.c_str(),
                version_name(r, head.version).c_str());
    return 0;
  }
  const auto diff = unified_diff(
      head.text, text, head.version ? version_name(r, head.version) : "(none)", text_name);
  std::fputs(diff.c_str(), stdout);
  const auto result = s.push(text, base, rules_author(), note);
  if (!result.error.empty()) fail(r.describe() + ": push failed: " + result.error);
  if (!result.pushed)
    fail(r.describe() + ": refused: version " + std::to_string(result.current) +
         " is in force, not " + std::to_string(base.value_or(0)) +
         " (pushed since you read it): look at it (floodgate rules show " + r.describe() +
         "), then push again with --base " + std::to_string(result.current) + ", or --force");
  std::printf("pushed %s%s\n", version_name(r, result.version).c_str(),
              note.empty() ? "" : (" (" + note + ")").c_str());
  return 0;
}

int push(const std::vector<std::string_view>& args) {
  std::string file, to;
  std::optional<std::int64_t> base;
  bool force = false, cluster = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const auto a = args[i];
    auto value = [&]() {
      if (i + 1 >= args.size()) usage(std::string(a) + " needs a value");
      return args[++i];
    };
    if (a == "--to")
      to = value();
    else if (a == "--base")
      base = parse_version(a, value(), 0);
    else if (a == "--force")
      force = true;
    else if (a == "--cluster")
      cluster = true;
    else if (a.starts_with("--") || !file.empty())
      usage("push: unexpected '" + std::string(a) + "'");
    else
      file = a;
  }
  if (file.empty() || to.empty()) usage("push needs FILE and --to URL#NAME");
  if (force && base) usage("push: --base and --force: give one");
  const auto r = parse_ref(to);
  // Validated first, exactly as floodgated would (the same parser and FILE:LINE messages).
  std::string text;
  try {
    text = read_config_file(file);
    (void)parse_config(text, file, placement_for(r, cluster));
  } catch (const std::exception& e) {
    fail(e.what());
  }
  rules_store s(r, store_timeout);
  check_store(s);
  const auto head = read_head(s);
  if (!force && !base) {
    if (head.version != 0) {
      std::fputs(unified_diff(head.text, text, version_name(r, head.version), file).c_str(),
                 stdout);
      fail(r.describe() + " is at version " + std::to_string(head.version) + " (by " + head.by +
           " at " + when(head.at_ms) + "): give --base " + std::to_string(head.version) + " if " +
           file + " was made from it, or --force to push over it");
    }
    base = 0;
  }
  return push_text(s, head, text, file, force ? std::nullopt : base, "");
}

int show(const std::vector<std::string_view>& args) {
  std::string where;
  std::optional<std::int64_t> version;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--version" && i + 1 < args.size()) {
      ++i;
      version = parse_version("--version", args[i], 1);
    } else if (args[i].starts_with("--") || !where.empty())
      usage("show: unexpected '" + std::string(args[i]) + "'");
    else
      where = args[i];
  }
  if (where.empty()) usage("show needs URL#NAME");
  const auto r = parse_ref(where);
  rules_store s(r, store_timeout);
  check_store(s);
  rules_version v;
  if (version) {
    std::string error;
    auto got = s.at(*version, error);
    if (!error.empty()) fail(r.describe() + ": cannot read: " + error);
    if (!got)
      fail(r.describe() + ": no version " + std::to_string(*version) +
           " in the history (it keeps the last " + std::to_string(rules_history_kept) + ")");
    v = std::move(*got);
  } else {
    v = read_head(s);
    if (v.version == 0) fail(r.describe() + ": nothing pushed under this name yet");
  }
  std::printf("# %s, pushed by %s at %s%s\n", version_name(r, v.version).c_str(), v.by.c_str(),
              when(v.at_ms).c_str(), v.note.empty() ? "" : (" (" + v.note + ")").c_str());
  std::fputs(v.text.c_str(), stdout);
  if (!v.text.empty() && v.text.back() != '\n') std::fputc('\n', stdout);
  return 0;
}

int history(const std::vector<std::string_view>& args) {
  if (args.size() != 1 || args[0].starts_with("--")) usage("history needs URL#NAME");
  const auto r = parse_ref(args[0]);
  rules_store s(r, store_timeout);
  check_store(s);
  const auto head = read_head(s);
  std::string error;
  const auto list = s.history(error);
  if (!list) fail(r.describe() + ": cannot read: " + error);
  if (list->empty()) fail(r.describe() + ": nothing pushed under this name yet");
  for (const auto& v : *list)
    std::printf("%s v%-5lld %s  %s%s\n", v.version == head.version ? "*" : " ",
                static_cast<long long>(v.version), when(v.at_ms).c_str(), v.by.c_str(),
                v.note.empty() ? "" : ("  (" + v.note + ")").c_str());
  return 0;
}

int rollback(const std::vector<std::string_view>& args) {
  std::string where;
  std::optional<std::int64_t> to;
  bool cluster = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--to" && i + 1 < args.size()) {
      ++i;
      to = parse_version("--to", args[i], 1);
    } else if (args[i] == "--cluster")
      cluster = true;
    else if (args[i].starts_with("--") || !where.empty())
      usage("rollback: unexpected '" + std::string(args[i]) + "'");
    else
      where = args[i];
  }
  if (where.empty() || !to) usage("rollback needs URL#NAME and --to N");
  const auto r = parse_ref(where);
  rules_store s(r, store_timeout);
  check_store(s);
  const auto head = read_head(s);
  std::string error;
  auto old = s.at(*to, error);
  if (!error.empty()) fail(r.describe() + ": cannot read: " + error);
  if (!old)
    fail(r.describe() + ": no version " + std::to_string(*to) +
         " in the history (it keeps the last " + std::to_string(rules_history_kept) + ")");
  if (*to == head.version)
    fail(r.describe() + ": version " + std::to_string(*to) + " is in force already");
  try {
    (void)parse_config(old->text, version_name(r, *to), placement_for(r, cluster));
  } catch (const std::exception& e) {
    fail(e.what());
  }
  // Based on the version just read: a push in between refuses the rollback.
  return push_text(s, head, old->text, version_name(r, *to), head.version,
                   "rollback to " + std::to_string(*to));
}

}  // namespace

int rules_command(int argc, char** argv) {
  return cli::run_subcommand(
      argc, argv, "rules", rules_usage,
      {{"push", push}, {"show", show}, {"history", history}, {"rollback", rollback}});
}

}  // namespace floodgate::service
