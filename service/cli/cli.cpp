// floodgate: the operator's command-line tool, beside floodgated.
//
//   floodgate check-config FILE [--cluster]
//   floodgate check-config --envoy PATH...
//   floodgate inspect --redis URL (--rules FILE | --rules-from URL#NAME) RULE KEY
//   floodgate reset   --redis URL (--rules FILE | --rules-from URL#NAME) RULE KEY
//   floodgate rules   push|show|history|rollback (cli/rules_commands.hpp)
//   floodgate override set|list|remove (cli/override_commands.hpp)
//
// check-config loads FILE exactly as floodgated does (same parser, same FILE:LINE messages);
// with --envoy, the paths as floodgated's --envoy-config loads them (envoy/envoy_config.hpp).
// inspect asks through the limiter with cost 0 (a peek: nothing consumed) for remaining and
// reset_after, and reads the state's Redis key raw (TYPE, its value, PTTL) on connections of
// its own, on the node that holds it (floodgate/inspect.hpp). reset forgets the key's state for the
// rule (limiter::reset). Both act under the policy that decides the key in a check: with
// --rules-from, a run-time override in force (cli/rules_in_force.hpp), else the rule's static
// overrides, else the rule; and say which ("override" line).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cli/override_commands.hpp"
#include "cli/rules_commands.hpp"
#include "cli/rules_in_force.hpp"
#include "cli/subcommands.hpp"
#include "config/config.hpp"
#include "envoy_config.hpp"
#include "floodgate/errors.hpp"
#include "floodgate/inspect.hpp"
#include "floodgate/limiter.hpp"

namespace {

using namespace floodgate;
using namespace std::chrono_literals;

constexpr const char* usage = R"(usage: floodgate check-config FILE [--cluster]
       floodgate check-config --envoy PATH...
       floodgate inspect --redis URL (--rules FILE | --rules-from URL#NAME) RULE KEY
       floodgate reset --redis URL (--rules FILE | --rules-from URL#NAME) RULE KEY
       floodgate rules push|show|history|rollback ...   (floodgate rules --help)
       floodgate override set|list|remove ...           (floodgate override --help)

  check-config  load a rules file as floodgated does: exit 0, or exit 1 with FILE:LINE and the
                problem. --cluster applies Redis Cluster's rule (a group's rules share a key).
                --envoy: the PATHs are envoyproxy/ratelimit configs (YAML files, or
                directories of them), loaded together as floodgated --envoy-config loads them.
  inspect       a key's state for a rule, without consuming: remaining, reset_after (a peek
                through the limiter), and the raw state in Redis (type, value, TTL), read
                on the node that holds it: the URL's, the slot's master (Cluster) or the
                primary (Sentinel), over TLS for rediss URLs.
  reset         forget the key's state for the rule: its next check sees full capacity.
                Both act under the policy that decides KEY in a check and name it (override):
                with --rules-from, the rules version in force and its run-time overrides
                (floodgate override); with --rules FILE, the file's overrides only.
  rules         the rules document floodgated --rules-from serves, in Redis: push a file
                (validated, diffed, refused unless based on the version in force), show,
                history, rollback.
  override      run-time per-key overrides stored with that document, each with an expiry:
                set, list, remove.
Exit: 0 done, 1 failed (bad file, unknown rule, backend error), 2 usage.
)";

[[noreturn]] void usage_error(const std::string& message) {
  std::fprintf(stderr, "floodgate: %s\n%s", message.c_str(), usage);
  std::exit(2);
}

// Thrown, not std::exit(1): exit() runs OpenSSL's and the other atexit clean-ups while a
// limiter's I/O thread may still be in a TLS handshake (the ASan lane saw a use after free).
// main() catches it once every local, limiters included, has been destroyed.
struct failure {
  std::string message;
};

[[noreturn]] void fail(const std::string& message) {
  throw failure{message};
}

struct key_args {
  std::string url;
  std::string rules_path;
  std::string rules_from;
  std::string rule;
  std::string key;
};

key_args parse_key_args(int argc, char** argv) {
  key_args a;
  std::vector<std::string> positional;
  for (int i = 2; i < argc; ++i) {
    const std::string_view arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage_error(std::string(arg) + " needs a value");
      return argv[++i];
    };
    if (arg == "--redis")
      a.url = value();
    else if (arg == "--rules")
      a.rules_path = value();
    else if (arg == "--rules-from")
      a.rules_from = value();
    else if (arg.starts_with("--"))
      usage_error("unknown argument '" + std::string(arg) + "'");
    else
      positional.emplace_back(arg);
  }
  if (a.url.empty()) usage_error("--redis URL is required");
  if (a.rules_path.empty() == a.rules_from.empty())
    usage_error("give --rules FILE or --rules-from URL#NAME (one of them)");
  if (positional.size() != 2) usage_error("give RULE and KEY");
  a.rule = positional[0];
  a.key = positional[1];
  if (a.key.empty()) usage_error("KEY must not be empty");
  return a;
}

// The limiter for `url`, with deadlines for a person waiting rather than a request path.
floodgate::limiter make_limiter(const std::string& url) {
  backend_options o;
  o.redis.timeout = 2s;
  o.redis.connect_timeout = 2s;
  o.redis.connections = 1;
  limiter_options l;
  l.local_denials = false;  // every answer from the backend
  return floodgate::limiter(url, o, l);
}

// A backend failure in the server's own words when it gave any ("AUTH refused: WRONGPASS
// ..."), not only the library's category ("backend not connected").
std::string backend_failure(floodgate::limiter& lim, std::error_code ec) {
  auto why = "backend: " + ec.message();
  if (const auto last = lim.get_backend().last_error(); !last.empty()) why += ": " + last;
  return why;
}

// The rule a key is checked under, and the override that decides it (if any).
struct key_rule {
  service::config rules;                             // keeps `base` alive
  std::unique_ptr<service::runtime_overrides> live;  // --rules-from's, or null
  const service::rule* base = nullptr;
  const service::rule* decides = nullptr;
  std::string override_line;  // what decides, in words
};

std::string time_left(std::int64_t ms) {
  const auto s = std::max<std::int64_t>(ms, 0) / 1000;
  return std::to_string(s / 3600) + "h" + std::to_string(s / 60 % 60) + "m" +
         std::to_string(s % 60) + "s";
}

// The rule named `a.rule` and what decides `a.key` under it, or exit 1.
key_rule find_rule(const key_args& a) {
  key_rule k;
  std::string where = a.rules_path;
  try {
    if (!a.rules_from.empty()) {
      const auto ref = service::cli::parse_ref(a.rules_from);
      auto in_force = service::cli::read_rules_in_force(ref);
      k.live = service::cli::read_live_overrides(in_force);
      where = in_force.name;
      k.rules = std::move(in_force.rules);
    } else {
      k.rules = service::load_config(a.rules_path);
    }
  } catch (const service::cli::failure& f) {
    fail(f.message);
  } catch (const service::cli::usage_failure& u) {
    usage_error(u.message);
  } catch (const std::exception& e) {
    fail(e.what());
  }
  k.base = k.rules.find(a.rule);
  if (!k.base) fail(where + ": no rule named '" + a.rule + "'");
  if (k.base->concurrency) fail(where + ": rule '" + a.rule + "' is a concurrency limit");
  const service::override_table::entry* e = nullptr;
  if (k.live) {
    const auto now = service::cli::unix_ms_now();
    e = k.live->current()->find(*k.base, a.key, now);
    if (e)
      k.override_line = std::string("run-time ") +
                        (e->kind == service::match_kind::exact ? "key '" : "prefix '") +
                        printable(e->match) + "', " + time_left(e->expires_at - now) + " left";
  }
  if (!e && k.base->overrides) {
    e = k.base->overrides->find(a.key);
    if (e)
      k.override_line = std::string("static ") +
                        (e->kind == service::match_kind::exact ? "key '" : "prefix '") +
                        printable(e->match) + "' (the rule's overrides:)";
  }
  k.decides = e ? &e->as_rule : k.base;
  if (!e) k.override_line = "none";
  // Not silently: a file cannot say what `floodgate override set` put in Redis.
  if (a.rules_from.empty())
    k.override_line += " (run-time overrides not read: --rules-from URL#NAME reads them)";
  return k;
}

// Prints the raw state of `key` for `p` (floodgate/inspect.hpp: as GET /v1/inspect).
void print_raw_state(const std::string& url, const policy& p, const std::string& key) {
  const auto s = read_raw_state(url, p, key, 2s);
  if (!s.readable) {
    std::printf("state          (not read: %s)\n", s.why_not.c_str());
    return;
  }
  std::printf("redis_key      %s\n", printable(s.redis_key).c_str());
  if (!s.error.empty()) fail(s.error);
  std::printf("redis_node     %s\n", s.node.c_str());
  if (s.type == "none") {
    std::printf("state          none (never checked, expired or reset: full capacity)\n");
    return;
  }
  std::printf("state          %s %s\n", s.type.c_str(), s.value.c_str());
  if (s.type == "zset")
    std::printf("state_members  %lld (at most the first 10 shown)\n",
                static_cast<long long>(s.members));
  std::printf("ttl_ms         %lld\n", static_cast<long long>(s.ttl_ms));
}

// check-config --envoy PATH...: the paths together, as floodgated's --envoy-config loads them
// (a domain in two files is an error there too).
int check_envoy_config(const std::vector<std::string>& paths) {
  if (paths.empty()) usage_error("check-config --envoy needs PATH...");
  try {
    const auto cfg = service::envoy::load_envoy_config(paths);
    std::string names;
    for (const auto& p : paths) names += (names.empty() ? "" : " ") + p;
    std::printf("%s: ok (%zu domains, %zu rules)\n", names.c_str(), cfg->domains().size(),
                cfg->rule_count());
    return 0;
  } catch (const std::exception& e) {
    fail(e.what());
  }
}

int check_config(int argc, char** argv) {
  std::vector<std::string> paths;
  bool envoy = false;
  auto where = service::placement::any;
  for (int i = 2; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--cluster")
      where = service::placement::one_key_per_group;
    else if (arg == "--envoy")
      envoy = true;
    else if (arg.starts_with("--"))
      usage_error("check-config takes FILE [--cluster], or --envoy PATH...");
    else
      paths.emplace_back(arg);
  }
  if (envoy) {
    if (where != service::placement::any) usage_error("--cluster is for rules files, not --envoy");
    return check_envoy_config(paths);
  }
  if (paths.size() != 1) usage_error("check-config needs one FILE (or --envoy PATH...)");
  const auto& path = paths.front();
  try {
    const auto cfg = service::load_config(path, where);
    std::printf("%s: ok (%zu rules, %zu groups)\n", path.c_str(), cfg.rules().size(),
                cfg.groups().size());
    return 0;
  } catch (const std::exception& e) {
    fail(e.what());
  }
}

int inspect(int argc, char** argv) {
  const auto a = parse_key_args(argc, argv);
  const auto k = find_rule(a);
  try {
    auto lim = make_limiter(a.url);
    const auto& p = k.decides->policy;  // the key's override, if any
    std::printf("rule           %s (%s, limit %lld per %lld ms, capacity %lld%s)\n",
                p.name().c_str(), std::string(to_string(p.algo())).c_str(),
                static_cast<long long>(p.limit()), static_cast<long long>(p.window().count()),
                static_cast<long long>(p.capacity()), k.base->shadow ? ", shadow" : "");
    std::printf("override       %s\n", k.override_line.c_str());
    std::printf("key            %s\n", printable(a.key).c_str());
    print_raw_state(a.url, p, a.key);
    const auto peek = lim.check(a.key, p, 0);
    if (peek.outcome == outcome::backend_error || peek.outcome == outcome::invalid_request)
      fail(backend_failure(lim, peek.error));
    std::printf("remaining      %lld of %lld\n", static_cast<long long>(peek.decision.remaining),
                static_cast<long long>(peek.decision.limit));
    std::printf("reset_after_ms %lld\n", static_cast<long long>(peek.decision.reset_after.count()));
    return 0;
  } catch (const std::exception& e) {
    fail(e.what());
  }
}

int reset(int argc, char** argv) {
  const auto a = parse_key_args(argc, argv);
  const auto k = find_rule(a);
  try {
    auto lim = make_limiter(a.url);
    if (const auto ec = lim.reset(a.key, k.decides->policy)) fail(backend_failure(lim, ec));
    std::printf("reset: rule %s, key %s, override %s\n", k.base->name().c_str(),
                printable(a.key).c_str(), k.override_line.c_str());
    return 0;
  } catch (const std::exception& e) {
    fail(e.what());
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) usage_error("give a command");
  const std::string_view command = argv[1];
  if (command == "--help" || command == "-h" || command == "help") {
    std::fputs(usage, stdout);
    return 0;
  }
  try {
    if (command == "check-config") return check_config(argc, argv);
    if (command == "inspect") return inspect(argc, argv);
    if (command == "reset") return reset(argc, argv);
    if (command == "rules") return service::rules_command(argc, argv);
    if (command == "override") return service::override_command(argc, argv);
  } catch (const failure& f) {
    std::fprintf(stderr, "floodgate: %s\n", f.message.c_str());
    return 1;
  }
  usage_error("unknown command '" + std::string(command) + "'");
}
