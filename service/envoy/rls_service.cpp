#include "rls_service.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <forward_list>
#include <limits>
#include <mutex>
#include <set>
#include <span>
#include <unordered_map>

#include "config/override_table.hpp"
#include "config/percent_decode.hpp"
#include "config/runtime_overrides.hpp"
#include "floodgate/errors.hpp"
#include "rls_metrics.hpp"

namespace floodgate::service::envoy {
namespace {

// A counter key too long to keep as it is, named by its SHA-256 (OpenSSL's: the library's own
// is internal to it).
std::string sha256_hex(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(data.data(), data.size(), digest, &size, EVP_sha256(), nullptr);
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * size);
  for (unsigned int i = 0; i < size; ++i) {
    out += hex[digest[i] >> 4];
    out += hex[digest[i] & 15];
  }
  return out;
}

constexpr std::size_t no_item = std::numeric_limits<std::size_t>::max();
constexpr std::uint32_t unlimited_remaining = std::numeric_limits<std::uint32_t>::max();

std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

// The counter key of a descriptor: every entry, so each distinct value of a key-only rule has
// its own counter (as upstream's cache key). ',', '=' and '%' are escaped: no two descriptors
// share a key. Longer than `max_plain`: '#' and its SHA-256 (no escaped key starts with '#'
// and has no '=').
// Written into `out` (its memory reused: a pooled call's key from an earlier call).
void counter_key(const std::vector<descriptor_entry>& entries, std::size_t max_plain,
                 std::string& out) {
  out.clear();
  std::size_t plain = entries.size();  // the separators
  for (const auto& e : entries) plain += e.key.size() + e.value.size();
  out.reserve(plain);  // one allocation at most, when nothing is escaped
  const auto put = [&out](std::string_view s) { percent_escape(out, s, ",="); };
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (i > 0) out += ',';
    put(entries[i].key);
    out += '=';
    put(entries[i].value);
  }
  if (out.size() > max_plain) out = "#" + sha256_hex(out);
}

// Until the end of the current window, aligned to the epoch as upstream counts: what a limit
// of 0 (no counter, no backend call) reports as duration_until_reset.
std::chrono::milliseconds until_window_end(std::chrono::milliseconds w) {
  if (w <= std::chrono::milliseconds{0}) return w;
  const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::system_clock::now().time_since_epoch());
  return w - now % w;
}

// Hits a call may add to a rule's counters: at most its capacity (or, with no counter, a
// request's whole hits_addend range), so no call pins a counter at its top.
std::uint64_t counted_hits(std::uint64_t hits, const floodgate::policy* p) {
  const std::uint64_t cap = p ? static_cast<std::uint64_t>(p->capacity()) : 0xffffffffULL;
  return std::min(hits, cap);
}

// One descriptor of the request.
struct slot {
  enum class kind { none, unlimited, limited } what = kind::none;
  const rate_limit* rule = nullptr;  // null for an override
  // The rule's override for the request's value (envoy_config.hpp), if one matches.
  const floodgate::policy* value_policy = nullptr;
  reported_limit limit;
  std::size_t item = no_item;
  std::uint64_t hits = 1;
  bool shadow = false;
  std::string metric;                     // by the request (rule_match); empty: the rule's
  std::vector<descriptor_entry> counter;  // share_threshold's entries; empty: the request's
};

// One counter to decide: descriptors naming the same counter are merged (their hits added).
struct item {
  std::string key;
  const floodgate::policy* policy = nullptr;  // null: a limit of 0 (refuses everything)
  std::uint64_t hits = 0;
  bool shadow = false;
  bool impossible = false;  // hits above the capacity: over the limit, whatever the state
  std::int64_t sent_cost = 0;
  std::size_t group = no_item;  // the check_all it goes in (none: no counter to ask)
  floodgate::decision decision;
  bool consumed = false;
  bool backend_failed = false;
};

struct call;
// Gives a call back to the pool (call_pool below) when its last owner lets it go.
struct call_return {
  void operator()(call* c) const noexcept;
};
using call_handle = std::unique_ptr<call, call_return>;

constexpr std::size_t max_spare_keys = 16;

struct call {
  request req;
  std::shared_ptr<const envoy_config> config;
  std::forward_list<floodgate::policy> overrides;  // stable addresses; none: no allocation
  std::vector<slot> slots;
  std::vector<item> items;
  // The keys of an earlier call's items, kept for this one's: a key is a string longer than
  // fits in place, freed otherwise on the backend's thread where the call ends.
  std::vector<std::string> spare_keys;
  // With several groups: the items' indices group after group, and where each group starts
  // (one more: the end). Empty with one group.
  std::vector<std::size_t> order;
  std::vector<std::size_t> starts;
  std::function<void(rls_result)> handler;
  rls_options options;
  rls_metrics* metrics = nullptr;
  std::mutex mutex;
  std::size_t pending = 0;
  std::error_code backend_error;  // the first failure of a check, if any
  // The run-time overrides when the call looked (keeps their policies alive), and its now.
  std::shared_ptr<const runtime_snapshot> live;
  std::int64_t live_now_ms = 0;
  // The call while its checks are out: the last answer takes it. (Their handlers then hold a
  // pointer and a group number: small enough for std::function to keep without allocating.)
  call_handle self;

  // Back to what a fresh call holds, keeping the vectors' capacity and the last request (the
  // next call swaps it out: its caller parses a later request into it, or frees it).
  void reset() noexcept {
    config.reset();
    overrides.clear();
    slots.clear();
    for (auto& it : items)
      if (spare_keys.size() < max_spare_keys) spare_keys.push_back(std::move(it.key));
    items.clear();
    order.clear();
    starts.clear();
    handler = nullptr;
    metrics = nullptr;
    pending = 0;
    backend_error = {};
    live.reset();
    live_now_ms = 0;
  }
};

// Calls are reused rather than allocated: a call is made on a connection's thread and let go
// on the backend's (the last answer's), so a fresh one per call was a malloc on one thread and
// a free on another each time, with its slots', items' and request's memory (glibc then hands
// the memory back to the other thread's arena, under its lock). A reused call keeps its
// vectors' capacity, and its last request goes back to the caller of the next one, in
// exchange for that one's (async_should_rate_limit_trading). Process-wide, and never
// destroyed: a call may come back after its rls_service is gone (at shutdown).
class call_pool {
 public:
  static call_pool& instance() {
    static auto* pool = new call_pool;  // never destroyed: see above
    return *pool;
  }

  call_handle take() {
    {
      std::lock_guard lock(mutex_);
      if (!spare_.empty()) {
        call* c = spare_.back();
        spare_.pop_back();
        return call_handle(c);
      }
    }
    return call_handle(new call);
  }

  void give(call* c) noexcept {
    c->reset();
    // A call that held a large request keeps no more than a usual one's worth of memory.
    if (c->slots.capacity() <= max_pooled_descriptors && small(c->req)) {
      std::lock_guard lock(mutex_);
      if (spare_.size() < max_spare) {
        spare_.push_back(c);
        return;
      }
    }
    delete c;
  }

 private:
  call_pool() { spare_.reserve(max_spare); }
  // More calls than this in flight at once are allocated as before (and freed when they end).
  static constexpr std::size_t max_spare = 1024;
  static constexpr std::size_t max_pooled_descriptors = 16;
  static constexpr std::size_t max_pooled_request_bytes = 4096;
  static bool small(const request& r) noexcept {
    std::size_t bytes = r.domain.capacity();
    for (const auto& d : r.descriptors)
      for (const auto& e : d.entries) bytes += e.key.capacity() + e.value.capacity();
    return bytes <= max_pooled_request_bytes;
  }
  std::mutex mutex_;
  std::vector<call*> spare_;
};

void call_return::operator()(call* c) const noexcept {
  call_pool::instance().give(c);
}

// The run-time entry for `value` under the rate_limit of policy `p`, or nullptr. The snapshot
// is loaded once a call, and the clock read only when it holds entries (most never do).
const override_table::entry* runtime_entry(call& c, const runtime_overrides& live,
                                           const floodgate::policy& p, std::string_view value) {
  if (!c.live) {
    c.live = live.current();
    if (!c.live->empty())
      c.live_now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  }
  return c.live->empty() ? nullptr : c.live->find(p, value, c.live_now_ms);
}

floodgate::decision failure_decision(const floodgate::policy& p) {
  floodgate::decision d;
  d.allowed = p.on_failure() == failure_mode::open;
  d.limit = p.capacity();
  d.remaining = d.allowed ? p.capacity() : 0;
  return d;
}

std::uint32_t clamp32(std::int64_t v) {
  return static_cast<std::uint32_t>(std::clamp<std::int64_t>(v, 0, unlimited_remaining));
}

void finish(call& c) {
  rls_result result;
  // Upstream's contract: the call fails and Envoy's failure_mode_deny decides. Nothing was
  // decided, so no rule's counters move.
  if (c.backend_error && c.options.on_backend_failure == backend_failure::error) {
    result.outcome = rls_result::kind::unavailable;
    result.message = "the rate limit backend failed: " + c.backend_error.message();
    auto handler = std::move(c.handler);
    return handler(std::move(result));
  }
  auto& resp = result.response;
  resp.statuses.resize(c.slots.size());
  bool over = false;
  for (std::size_t i = 0; i < c.slots.size(); ++i) {
    const auto& s = c.slots[i];
    auto& st = resp.statuses[i];
    if (s.what == slot::kind::unlimited) {
      st.limit_remaining = unlimited_remaining;
      continue;
    }
    if (s.what == slot::kind::none) continue;
    const auto& it = c.items[s.item];
    st.current_limit = s.limit;
    const auto& d = it.decision;
    const bool refused = it.impossible || !d.allowed;
    std::int64_t remaining = d.remaining;
    // Allowed alone but not consumed (another descriptor refused the request): what it has.
    if (!refused && !it.consumed && it.sent_cost > 0) remaining += it.sent_cost;
    if (it.policy) remaining = std::min(remaining, it.policy->capacity());
    st.limit_remaining = refused ? 0 : clamp32(remaining);
    const auto wait =
        refused && d.retry_after != floodgate::decision::never && d.retry_after.count() > 0
            ? d.retry_after
            : d.reset_after;
    // No counter (a limit of 0): no state to ask, the window's end as upstream reports it.
    st.duration_until_reset =
        it.policy
            ? wait
            : until_window_end(s.rule ? s.rule->window() : window_of(s.limit.per).value_or(wait));
    st.status = refused && !s.shadow ? code::over_limit : code::ok;
    over = over || st.status == code::over_limit;
    if (c.metrics) {
      const std::string_view rule = s.rule ? std::string_view(s.rule->metric_name) : "_override";
      verdict v = verdict::within_limit;
      if (refused) {
        v = verdict::over_limit;
      } else if (it.policy) {
        const auto used = it.policy->capacity() - remaining;
        if (used * 10 > it.policy->capacity() * 8) v = verdict::near_limit;
      }
      // At most the rule's capacity a call: a client's hits_addend (up to 2^64 - 1) must not
      // pin the counters at their most, where rate() over them reads 0 for good.
      c.metrics->record(c.req.domain, rule, counted_hits(s.hits, it.policy), v, s.shadow, s.metric);
    }
  }
  resp.overall = over && !c.options.shadow_mode ? code::over_limit : code::ok;
  if (c.options.response_headers) {
    // Upstream's choice: the limited status with the least remaining.
    const descriptor_status* least = nullptr;
    for (const auto& st : resp.statuses)
      if (st.current_limit && (!least || st.limit_remaining < least->limit_remaining)) least = &st;
    if (least) {
      const auto ms = least->duration_until_reset.value_or(std::chrono::milliseconds{0}).count();
      resp.response_headers_to_add = {
          {"RateLimit-Limit", std::to_string(least->current_limit->requests_per_unit)},
          {"RateLimit-Remaining", std::to_string(least->limit_remaining)},
          {"RateLimit-Reset", std::to_string((ms + 999) / 1000)}};
    }
  }
  auto handler = std::move(c.handler);
  handler(std::move(result));
}

// Records the answer of check_all `group`; the last answer finishes.
void settle(call* c, std::size_t group, const floodgate::multi_check_result& r) {
  call_handle last;
  {
    // One group (starts empty, set before any check went out): its answer is the only one.
    std::unique_lock lock(c->mutex, std::defer_lock);
    if (!c->starts.empty()) lock.lock();
    const bool ok = r.outcome == outcome::allowed || r.outcome == outcome::over_limit ||
                    r.outcome == outcome::backend_error;
    const auto record = [&](item& it, std::size_t j) {
      if (ok && j < r.decisions.size()) {
        it.decision = r.decisions[j];
      } else {
        // Not expected (requests are validated first): the rule's failure mode decides.
        it.decision = failure_decision(*it.policy);
      }
      it.backend_failed = r.outcome == outcome::backend_error || !ok;
      it.consumed = r.outcome == outcome::allowed;
    };
    if (c->starts.empty()) {  // one group: every item with a counter, in order
      std::size_t j = 0;
      for (auto& it : c->items)
        if (it.group == group) record(it, j++);
    } else {
      for (std::size_t k = c->starts[group]; k < c->starts[group + 1]; ++k)
        record(c->items[c->order[k]], k - c->starts[group]);
    }
    if (r.outcome == outcome::backend_error && !c->backend_error)
      c->backend_error = r.error ? r.error : make_error_code(errc::server_error);
    if (--c->pending == 0) last = std::move(c->self);
  }
  if (last) finish(*last);
}

}  // namespace

rls_service::rls_service(std::shared_ptr<floodgate::limiter> limiter,
                         const envoy_config_store& store, rls_options options, rls_metrics* metrics)
    : limiter_(std::move(limiter)), store_(store), options_(options), metrics_(metrics) {}

bool rls_service::ready() const noexcept {
  return limiter_->get_backend().healthy();
}

std::string rls_service::validate(const request& req) const {
  const auto& caps = options_.caps;
  if (req.domain.empty()) return "domain must not be empty";
  if (req.descriptors.empty()) return "a request needs at least one descriptor";
  if (req.descriptors.size() > caps.max_descriptors)
    return "too many descriptors: " + std::to_string(req.descriptors.size()) + " (at most " +
           std::to_string(caps.max_descriptors) + ")";
  for (std::size_t i = 0; i < req.descriptors.size(); ++i) {
    const auto& d = req.descriptors[i];
    const auto which = [i] { return "descriptor " + std::to_string(i); };  // only to refuse
    if (d.entries.empty()) return which() + " has no entries";
    // Keys come from Envoy's config (descriptor_key), never from its clients.
    for (std::size_t j = 0; j < d.entries.size(); ++j)
      if (d.entries[j].key.empty())
        return which() + " entry " + std::to_string(j) + " has an empty key";
    if (d.limit) {
      const auto w = window_of(d.limit->per);
      if (!w) return which() + ": the limit override has no valid unit";
      if (static_cast<std::int64_t>(d.limit->requests_per_unit) * w->count() >
          floodgate::policy::max_capacity_window_product)
        return which() + ": the limit override's requests_per_unit is too large for its unit";
    }
  }
  return {};
}

void rls_service::async_should_rate_limit(request req, clock::time_point deadline,
                                          std::function<void(rls_result)> handler) {
  async_should_rate_limit_trading(req, deadline, std::move(handler));
}

void rls_service::async_should_rate_limit_trading(request& req, clock::time_point deadline,
                                                  std::function<void(rls_result)> handler) {
  if (auto problem = validate(req); !problem.empty()) {
    rls_result r;
    r.outcome = rls_result::kind::invalid_argument;
    r.message = std::move(problem);
    return handler(std::move(r));
  }
  auto c = call_pool::instance().take();
  std::swap(c->req, req);  // the caller gets the call's last request, to parse into
  c->config = store_.get();
  c->handler = std::move(handler);
  c->options = options_;
  c->metrics = metrics_;
  const auto& cfg = *c->config;
  const auto& domain = c->req.domain;
  const bool known_domain = cfg.has_domain(domain);

  // Match every descriptor (the override first, as upstream), then drop replaced limits.
  c->slots.resize(c->req.descriptors.size());
  std::set<std::string, std::less<>> replaced;
  for (std::size_t i = 0; i < c->slots.size(); ++i) {
    const auto& d = c->req.descriptors[i];
    auto& s = c->slots[i];
    s.hits = d.hits_addend.value_or(c->req.hits_addend == 0 ? 1 : c->req.hits_addend);
    if (!known_domain) continue;
    if (d.limit) {
      s.what = slot::kind::limited;
      s.limit = {"", d.limit->requests_per_unit, d.limit->per};
      continue;
    }
    auto m = cfg.match(domain, d.entries);
    const rate_limit* r = m.limit;
    if (!r) continue;
    s.rule = r;
    s.metric = std::move(m.metric_name);
    s.counter = std::move(m.counter_entries);
    if (r->unlimited) {
      s.what = slot::kind::unlimited;
      continue;
    }
    s.what = slot::kind::limited;
    s.limit = {r->name, r->requests_per_unit, r->per};
    // The value of the entry the limit sits on is the key an override names: a run-time
    // one first (it sets only the limit: tag 0, the rule's unit), then the file's.
    const override_table::entry* o = nullptr;
    if (options_.live && r->policy)
      o = runtime_entry(*c, *options_.live, *r->policy, d.entries.back().value);
    if (!o && r->overrides) o = r->overrides->find(d.entries.back().value);
    if (o) {
      s.value_policy = &o->as_rule.policy;
      s.limit.requests_per_unit = static_cast<std::uint32_t>(o->as_rule.policy.limit());
      if (o->tag) s.limit.per = static_cast<unit>(o->tag);
    }
    s.shadow = r->shadow_mode;
    for (const auto& name : r->replaces) replaced.insert(name);
  }
  for (auto& s : c->slots)
    if (s.what == slot::kind::limited && s.rule && !s.rule->name.empty() &&
        replaced.contains(s.rule->name))
      s.what = slot::kind::none;

  // Counters: one item per (policy, key); descriptors naming the same one add their hits.
  // The request overrides' policy names, made only when one comes (snprintf per call was a
  // thirtieth of a call's instructions).
  char override_prefix[40] = "";
  for (std::size_t i = 0; i < c->slots.size(); ++i) {
    auto& s = c->slots[i];
    if (s.what != slot::kind::limited) continue;
    const auto& d = c->req.descriptors[i];
    const floodgate::policy* p = nullptr;
    if (s.rule) {
      if (s.value_policy)
        p = s.value_policy;
      else if (s.rule->policy)
        p = &*s.rule->policy;  // none: requests_per_unit 0, refuses all
    } else if (d.limit->requests_per_unit > 0) {
      if (!override_prefix[0])
        std::snprintf(override_prefix, sizeof override_prefix, "envoy.%016llx.o.",
                      static_cast<unsigned long long>(fnv1a(domain)));
      const std::string name = override_prefix + std::string(to_string(d.limit->per));
      auto same = std::find_if(c->overrides.begin(), c->overrides.end(), [&](const auto& o) {
        return o.name() == name && o.limit() == d.limit->requests_per_unit;
      });
      p = same != c->overrides.end()
              ? &*same
              : &c->overrides.emplace_front(name, algorithm::fixed_window,
                                            d.limit->requests_per_unit, *window_of(d.limit->per));
    }
    std::string key;
    if (!c->spare_keys.empty()) {
      key = std::move(c->spare_keys.back());
      c->spare_keys.pop_back();
    }
    counter_key(s.counter.empty() ? d.entries : s.counter, options_.caps.max_plain_counter_key,
                key);
    std::size_t found = no_item;
    for (std::size_t j = 0; j < c->items.size(); ++j)
      if (c->items[j].key == key && c->items[j].policy && p &&
          c->items[j].policy->name() == p->name() && c->items[j].shadow == s.shadow)
        found = j;
    if (found == no_item) {
      found = c->items.size();
      item fresh;
      fresh.key = std::move(key);
      fresh.policy = p;
      fresh.shadow = s.shadow;
      c->items.push_back(std::move(fresh));
    }
    auto& it = c->items[found];
    // Two overrides in one unit name one counter (as upstream's key): the smaller limit holds.
    if (it.policy && p && p->capacity() < it.policy->capacity()) it.policy = p;
    // Saturating: any sum this large is over every limit anyway.
    constexpr std::uint64_t cap = std::uint64_t{1} << 62;
    it.hits = std::min(cap, std::min(cap, it.hits) + std::min(cap, s.hits));
    s.item = found;
  }
  for (auto& it : c->items)
    it.impossible = !it.policy || it.hits > static_cast<std::uint64_t>(it.policy->capacity());

  if (clock::now() >= deadline) {
    rls_result r;
    r.outcome = rls_result::kind::deadline_exceeded;
    r.message = "the call's deadline passed before it reached the backend";
    auto h = std::move(c->handler);
    return h(std::move(r));
  }

  // The checks to make: the enforced items together (per key on a backend that needs one key
  // per check_all), each shadow item alone. When an enforced item can never pass, the request
  // is refused whole: the others are only looked at (cost 0), to report what they have.
  bool enforced_impossible = false;
  for (const auto& it : c->items)
    enforced_impossible = enforced_impossible || (!it.shadow && it.impossible);
  const bool per_key = limiter_->get_backend().check_all_needs_one_key();
  const std::size_t max_items = std::max<std::size_t>(1, limiter_->options().max_items);
  // One pass: enforced items fill one open group at a time (one per key when per_key: the
  // others of that key are full), each shadow item is a group of its own.
  struct open_group {
    std::size_t group = no_item;
    std::size_t size = 0;
  };
  open_group open;
  std::unordered_map<std::string_view, open_group> open_by_key;  // per_key only
  std::size_t groups = 0;
  for (auto& it : c->items) {
    if (!it.policy) continue;
    const bool peek = it.impossible || (!it.shadow && enforced_impossible);
    it.sent_cost = peek ? 0 : static_cast<std::int64_t>(it.hits);
    if (it.shadow) {
      it.group = groups++;
      continue;
    }
    auto& o = per_key ? open_by_key[it.key] : open;
    if (o.group == no_item || o.size == max_items) o = {groups++, 0};
    it.group = o.group;
    ++o.size;
  }
  if (groups == 0) return finish(*c);
  // Each group's items, in item order (settle reads the decisions back in the same order), one
  // group after another: with several groups, `order` and `starts` (kept for settle) say where.
  std::array<floodgate::check_item, 8> small{};
  std::vector<floodgate::check_item> large;
  std::span<const floodgate::check_item> all;
  if (groups == 1) {
    std::size_t n = 0;
    for (const auto& it : c->items) {
      if (it.group == no_item) continue;
      const floodgate::check_item ci{it.key, it.policy, it.sent_cost};
      if (n < small.size()) small[n] = ci;
      if (n == small.size()) large.assign(small.begin(), small.end());
      if (n >= small.size()) large.push_back(ci);
      ++n;
    }
    all = n <= small.size() ? std::span<const floodgate::check_item>(small.data(), n)
                            : std::span<const floodgate::check_item>(large);
  } else {
    c->starts.assign(groups + 1, 0);
    for (const auto& it : c->items)
      if (it.group != no_item) ++c->starts[it.group + 1];
    for (std::size_t g = 0; g < groups; ++g) c->starts[g + 1] += c->starts[g];
    c->order.resize(c->starts[groups]);
    large.resize(c->starts[groups]);
    std::vector<std::size_t> next(c->starts.begin(), c->starts.end() - 1);
    for (std::size_t j = 0; j < c->items.size(); ++j) {
      const auto& it = c->items[j];
      if (it.group == no_item) continue;
      const auto at = next[it.group]++;
      c->order[at] = j;
      large[at] = {it.key, it.policy, it.sent_cost};
    }
    all = large;
  }
  c->pending = groups;
  auto* raw = c.get();
  raw->self = std::move(c);  // the call is its own until the last answer
  for (std::size_t g = 0; g < groups; ++g) {
    // The limiter copies the items: the spans may go when this returns.
    const auto batch =
        groups == 1 ? all : all.subspan(raw->starts[g], raw->starts[g + 1] - raw->starts[g]);
    limiter_->async_check_all(batch,
                              [raw, g](floodgate::multi_check_result r) { settle(raw, g, r); });
  }
}

}  // namespace floodgate::service::envoy
