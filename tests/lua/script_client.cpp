#include "script_client.hpp"

#include <hiredis/hiredis.h>

#include <cstdlib>
#include <stdexcept>

#include "redis/script_decision.hpp"
#include "redis/scripts.hpp"

namespace floodgate::test {
namespace {

reply flatten(const redisReply* r) {
  reply out;
  switch (r->type) {
    case REDIS_REPLY_STRING:
      out.kind = reply::string;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_STATUS:
      out.kind = reply::status;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ERROR:
      out.kind = reply::error;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_INTEGER:
      out.kind = reply::number;
      out.integer = r->integer;
      break;
    case REDIS_REPLY_ARRAY:
      out.kind = reply::array;
      for (size_t i = 0; i < r->elements; ++i) out.elements.push_back(flatten(r->element[i]));
      break;
    default:
      out.kind = reply::nil;
      break;
  }
  return out;
}

std::string str(std::int64_t v) {
  return std::to_string(v);
}

}  // namespace

ints5 as_ints(const decision& d) {
  return {d.allowed ? 1 : 0, d.limit, d.remaining, d.reset_after.count(),
          d.retry_after == decision::never ? -1 : d.retry_after.count()};
}

std::string to_string(const ints5& v) {
  std::string out = "{";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "}";
}

std::string algorithm_name(const ::testing::TestParamInfo<algorithm>& info) {
  return std::string(floodgate::to_string(info.param));
}

std::optional<ints5> ints_of(const reply& r, std::size_t item) {
  if (r.kind != reply::array || r.elements.size() < 5 * (item + 1)) return std::nullopt;
  ints5 out{};
  for (std::size_t i = 0; i < 5; ++i) {
    const reply& e = r.elements[5 * item + i];
    if (e.kind != reply::number) return std::nullopt;
    out[i] = e.integer;
  }
  return out;
}

script_client::script_client(std::uint16_t port) {
  timeval tv{10, 0};
  context_ = redisConnectWithTimeout("127.0.0.1", port, tv);
  if (!context_ || context_->err) {
    const std::string err = context_ ? context_->errstr : "allocation failed";
    if (context_) redisFree(context_);
    throw std::runtime_error("script_client: connect: " + err);
  }
  redisSetTimeout(context_, tv);
  std::vector<const redis::script*> all = {&redis::multi_script(), &redis::multi_block_script()};
  for (auto a : {algorithm::sliding_log, algorithm::sliding_window, algorithm::fixed_window,
                 algorithm::token_bucket, algorithm::gcra})
    all.push_back(&redis::script_for(a));
  for (const auto* s : all) {
    const reply r = run({"SCRIPT", "LOAD", std::string(s->source)});
    if (r.kind != reply::string || r.str != s->sha1)
      throw std::runtime_error("script_client: SCRIPT LOAD of '" + std::string(s->name) +
                               "' gave '" + r.str + "', embedded SHA1 is " + std::string(s->sha1));
  }
  if (const char* v = std::getenv("FLOODGATE_LUA_FCALL"); v != nullptr && *v == '1') {
    const auto& lib = redis::script_library();
    const reply r = run({"FUNCTION", "LOAD", "REPLACE", std::string(lib.source)});
    if (r.kind != reply::string || r.str != lib.name)
      throw std::runtime_error("script_client: FUNCTION LOAD gave '" + r.str + "'");
    fcall_ = true;
  }
}

namespace {

// The script whose SHA1 is `sha1`, or null.
const redis::script* script_with_sha(std::string_view sha1) {
  for (const auto* s :
       {&redis::multi_script(), &redis::multi_block_script(), &redis::batch_script(),
        &redis::refund_script(), &redis::acquire_script(), &redis::release_script(),
        &redis::script_for(algorithm::sliding_log), &redis::script_for(algorithm::sliding_window),
        &redis::script_for(algorithm::fixed_window), &redis::script_for(algorithm::token_bucket),
        &redis::script_for(algorithm::gcra)})
    if (s->sha1 == sha1) return s;
  return nullptr;
}

}  // namespace

script_client::~script_client() {
  if (context_) redisFree(context_);
}

namespace {

// Whether `name` (a SHA1 or a function name) is one of the per-algorithm scripts.
bool is_lone_script(std::string_view name) {
  for (auto a : {algorithm::sliding_log, algorithm::sliding_window, algorithm::fixed_window,
                 algorithm::token_bucket, algorithm::gcra}) {
    const auto& s = redis::script_for(a);
    if (name == s.sha1 || name == s.function) return true;
  }
  return false;
}

// The burst of a well-formed call of a per-algorithm script (the capacity its reply is read
// with), else nullopt.
std::optional<std::int64_t> lone_capacity(const std::vector<std::string>& args) {
  if (args.size() != 9 || (args[0] != "EVALSHA" && args[0] != "FCALL") ||
      !is_lone_script(args[1]) || args[2] != "1")
    return std::nullopt;
  try {
    std::size_t used = 0;
    const long long b = std::stoll(args[6], &used);
    if (used != args[6].size() || b < 1) return std::nullopt;
    return b;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace

void script_client::append(const std::vector<std::string>& args) {
  if (fcall_ && args.size() >= 2 && args[0] == "EVALSHA") {
    if (const auto* s = script_with_sha(args[1])) {
      auto as_function = args;
      as_function[0] = "FCALL";
      as_function[1] = std::string(s->function);
      fcall_ = false;  // (append once, without recursing into this branch)
      append(as_function);
      fcall_ = true;
      return;
    }
  }
  lone_capacity_.push_back(lone_capacity(args));
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  if (redisAppendCommandArgv(context_, static_cast<int>(args.size()), argv.data(), lens.data()) !=
      REDIS_OK)
    throw std::runtime_error(std::string("script_client: append: ") + context_->errstr);
}

reply script_client::read_raw() {
  void* raw = nullptr;
  if (redisGetReply(context_, &raw) != REDIS_OK || !raw)
    throw std::runtime_error(std::string("script_client: read: ") + context_->errstr);
  if (!lone_capacity_.empty()) lone_capacity_.pop_front();
  auto* r = static_cast<redisReply*>(raw);
  reply out = flatten(r);
  freeReplyObject(r);
  return out;
}

reply script_client::read() {
  const auto capacity = lone_capacity_.empty() ? std::nullopt : lone_capacity_.front();
  reply out = read_raw();
  if (!capacity) return out;
  // A lone check's reply, read as the backend reads it (script_decision.hpp), as five integers.
  std::vector<std::int64_t> v;
  const bool packed = out.kind == reply::number;
  if (packed) {
    v.push_back(out.integer);
  } else if (out.kind == reply::array) {
    for (const auto& e : out.elements) {
      if (e.kind != reply::number) return out;
      v.push_back(e.integer);
    }
  } else {
    return out;
  }
  const auto d = redis::lone_decision(*capacity, packed, v);
  if (!d) return out;
  reply five;
  five.kind = reply::array;
  for (long long x : as_ints(*d)) {
    reply e;
    e.kind = reply::number;
    e.integer = x;
    five.elements.push_back(e);
  }
  return five;
}

std::vector<std::string> script_client::eval(algorithm a, const std::string& key,
                                             const core::params& p, std::int64_t cost,
                                             std::optional<std::int64_t> now) {
  return eval_raw(a, {key},
                  {str(p.limit), str(p.window), str(p.burst), str(cost), now ? str(*now) : ""});
}

std::vector<std::string> script_client::eval_raw(algorithm a, std::vector<std::string> keys,
                                                 std::vector<std::string> argv) {
  std::vector<std::string> out = {"EVALSHA", std::string(redis::script_for(a).sha1),
                                  str(static_cast<std::int64_t>(keys.size()))};
  out.insert(out.end(), keys.begin(), keys.end());
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

std::vector<std::string> script_client::eval_multi(const std::vector<item>& items,
                                                   std::optional<std::int64_t> now) {
  std::vector<std::string> keys, argv = {now ? str(*now) : ""};
  for (const auto& i : items) {
    keys.push_back(i.key);
    argv.insert(argv.end(), {std::string(floodgate::to_string(i.algo)), str(i.p.limit),
                             str(i.p.window), str(i.p.burst), str(i.cost)});
  }
  return eval_multi_raw(std::move(keys), std::move(argv));
}

std::vector<std::string> script_client::eval_multi_block(const std::vector<item>& items,
                                                         const std::vector<std::int64_t>& block_for,
                                                         std::optional<std::int64_t> now) {
  std::vector<std::string> keys, argv = {now ? str(*now) : ""};
  for (const auto& i : items) keys.push_back(i.key);
  for (const auto& i : items) keys.push_back(i.key + ":bk");
  for (std::size_t n = 0; n < items.size(); ++n) {
    const auto& i = items[n];
    argv.insert(argv.end(), {std::string(floodgate::to_string(i.algo)), str(i.p.limit),
                             str(i.p.window), str(i.p.burst), str(i.cost), str(block_for[n])});
  }
  std::vector<std::string> out = {"EVALSHA", std::string(redis::multi_block_script().sha1),
                                  str(static_cast<std::int64_t>(keys.size()))};
  out.insert(out.end(), keys.begin(), keys.end());
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

std::vector<std::string> script_client::eval_multi_raw(std::vector<std::string> keys,
                                                       std::vector<std::string> argv) {
  std::vector<std::string> out = {"EVALSHA", std::string(redis::multi_script().sha1),
                                  str(static_cast<std::int64_t>(keys.size()))};
  out.insert(out.end(), keys.begin(), keys.end());
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

namespace {

std::int64_t digits(std::int64_t v) {  // 0 for 0
  std::int64_t d = 0;
  for (; v > 0; v /= 10) ++d;
  return d;
}

double power_of_ten(std::int64_t d) {
  double p = 1;
  while (d-- > 0) p *= 10;
  return p;
}

}  // namespace

namespace {

std::int64_t second_of(std::int64_t ms) { return core::floor_div(ms, 1000); }

}  // namespace

std::int64_t redis_expiry(const core::any_state& s, std::int64_t now, const core::params& p) {
  if (const auto* g = std::get_if<core::gcra_state>(&s); g && g->present)
    return (second_of(g->whole) + 1) * 1000 - now;
  return core::expiry(s, now, p);
}

bool keeps_expiry(const core::any_state& before, const core::any_state& after,
                  const core::params& p) {
  const auto* b = std::get_if<core::gcra_state>(&before);
  const auto* a = std::get_if<core::gcra_state>(&after);
  const auto one_integer = [&](const core::gcra_state& s) {
    // As Lua computes it: in doubles, exact below 2^53, and 2^53 or more when not.
    return static_cast<double>(s.whole) * static_cast<double>(p.limit) +
               static_cast<double>(s.rem) <
           9007199254740992.0;
  };
  return b && a && b->present && a->present && second_of(b->whole) == second_of(a->whole) &&
         one_integer(*b) && one_integer(*a);
}

bool adds_in_place(const core::any_state& s, std::int64_t now, const core::params& p,
                   std::int64_t cost) {
  if (cost < 1) return false;
  const std::int64_t index = now >= 0 ? now / p.window : -((-now - 1) / p.window) - 1;
  if (index < 1) return false;
  // pack(index, ..., count): the count's digits are followed by one digit count per number
  // after the first; INCRBY adds cost at the count's last digit.
  if (const auto* fw = std::get_if<core::fixed_window_state>(&s)) {
    if (fw->count < 1 || fw->start != index * p.window) return false;
    // (A digit count past 9 is written ':'..'@': no integer then.)
    if (digits(fw->count + cost) != digits(fw->count) || digits(fw->count) > 9) return false;
    const double packed =
        (index * power_of_ten(digits(fw->count)) + static_cast<double>(fw->count)) * 10 +
        static_cast<double>(digits(fw->count));
    return packed + 10.0 * static_cast<double>(cost) < 9007199254740992.0;
  }
  if (const auto* sw = std::get_if<core::sliding_window_state>(&s)) {
    if (sw->current < 1 || sw->start != index * p.window) return false;
    if (digits(sw->current + cost) != digits(sw->current)) return false;
    const std::int64_t dy = digits(sw->previous), dz = digits(sw->current);
    if (dy > 9 || dz > 9) return false;
    const double packed =
        ((index * power_of_ten(dy) + static_cast<double>(sw->previous)) * power_of_ten(dz) +
         static_cast<double>(sw->current)) * 100 + static_cast<double>(dy * 10 + dz);
    return packed + 100.0 * static_cast<double>(cost) < 9007199254740992.0;
  }
  return false;
}

}  // namespace floodgate::test
