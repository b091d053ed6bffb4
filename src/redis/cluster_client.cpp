#include "redis/cluster_client.hpp"

#include <algorithm>
#include <array>
#include <set>

#include "floodgate/errors.hpp"
#include "redis/cluster_protocol.hpp"
#include "redis/node_pool.hpp"
#include "redis/resp_writer.hpp"
#include "redis/timer.hpp"

namespace floodgate::redis {

using namespace std::chrono_literals;
using steady = request::clock;

namespace {

constexpr auto refresh_min_interval = 100ms;
constexpr auto unhealthy_refresh_interval = 500ms;
// The map is read this often even when all is well: nodes leave it (a demoted master, a
// replaced pod) without any call noticing, and only a read retires them.
constexpr auto periodic_refresh_interval = 5s;
constexpr auto tryagain_backoff = 5ms;

// Routes each call by its slot (request::route: where redirections sent it so far) and
// decides what its node's answer means: MOVED and ASK followed, TRYAGAIN retried, the rest
// answered. The nodes, their health and the waiting room are the pool's (node_pool.hpp).
class cluster_client final : public pool_client, public call_router {
 public:
  cluster_client(std::vector<redis_endpoint> seeds, const redis_options& options,
                 script_set scripts)
      : pool_client(seeds.front().tls, options, std::move(scripts)),
        credentials_(seeds.front()),
        refresh_timer_(pool_.context()),
        tick_timer_(pool_.context()) {
    for (const auto& s : seeds) seeds_.push_back(node_for(s.host, s.port));
  }

  // --- pool_client (io thread) -------------------------------------------------------------

  void start() override {
    request_refresh();
    tick();
  }

  void stop() override {
    refresh_timer_.cancel();
    tick_timer_.cancel();
    healthy_.store(false, std::memory_order_relaxed);
  }

  // Each call is routed here, on the io thread: its node's connections complete it on this
  // thread too, so call_done() always runs here. A CLUSTER SLOTS of a refresh given back
  // unsent is not a routed call: it fails, and the refresh is asked again.
  void route(request_ptr r, bool fresh) override {
    if (fresh)
      r->route = {.by = this};
    else if (r->route.by != this)
      return r->complete(errc::not_connected, nullptr);
    request& c = *r;
    if (c.deadline <= steady::now()) return c.complete(errc::timeout, nullptr);
    node* n = c.route.target;
    if (!n && c.slot >= 0 && c.slot < cluster_slots) n = slots_[static_cast<std::size_t>(c.slot)];
    if (!n) n = any_node();
    if (!n) return c.complete(errc::not_connected, nullptr);
    if (!pool_.send(std::move(r), *n))
      request_refresh();  // a failover may have given the slot to a reachable node
  }

  void readiness_changed(node&, bool ready) override {
    if (!ready) request_refresh();  // the node may be failing over
    update_health();
  }

  void breaker_changed(node&, breaker::change) override { update_health(); }

  // Followed or retried here (call_done); one that runs out of redirections fails the call
  // with the reply all the same.
  bool routing_reply(std::string_view error) const noexcept override {
    for (std::string_view code : {"MOVED ", "ASK ", "TRYAGAIN "})
      if (error.starts_with(code)) return true;
    return false;
  }

  // --- completions (io thread) -------------------------------------------------------------

  // call_router: a call's node answered it (and heard of it first: request::finish).
  void call_done(request_ptr c, std::error_code ec, reply* r) noexcept override {
    if (pool_.torn_down()) return c->complete(ec, r);
    if (r != nullptr && r->is_error()) {
      const auto code = r->error_code();
      if ((code == "MOVED" || code == "ASK") && c->route.redirects < max_cluster_redirects) {
        if (auto to = parse_redirect(r->str)) {
          pool_.health().redirections.fetch_add(1, std::memory_order_relaxed);
          node* from = static_cast<node*>(c->observer);  // the node it was sent to
          const std::string& host =
              to->host.empty() && from ? from->config().endpoint.host : to->host;
          node* n = node_for(host, to->port);
          again(*c);
          ++c->route.redirects;
          c->route.target = n;
          c->asking = to->what == redirect::kind::ask;
          if (to->what == redirect::kind::moved) {
            slots_[static_cast<std::size_t>(to->slot)] = n;
            request_refresh();  // one slot moved: others probably did too
          }
          // On the next turn, not from inside the connection's reply loop.
          return pool_.hold(std::move(c), steady::now());
        }
      }
      if (code == "TRYAGAIN" || code == "CLUSTERDOWN") {
        // TRYAGAIN: a multi-key call met a slot half migrated; CLUSTERDOWN: a failover is
        // under way. Both go away by themselves, after as long as the migration or failover
        // takes: retry with backoff while the deadline allows (not a hop count, which a slow
        // migration outlasts).
        if (code == "CLUSTERDOWN") request_refresh();
        const auto at =
            steady::now() + tryagain_backoff * (1 << std::min<int>(c->route.tryagains, 4));
        if (at < c->deadline) {
          again(*c);
          if (c->route.tryagains < 255) ++c->route.tryagains;
          return pool_.hold(std::move(c), at);
        }
      }
    }
    if (ec == errc::not_connected || ec == errc::timeout) request_refresh();
    c->complete(ec, r);
  }

  void on_slots(node* asked, std::error_code ec, reply* r) noexcept {
    if (pool_.torn_down()) return;
    refresh_in_flight_ = false;
    std::optional<std::vector<slot_range>> ranges;
    if (!ec && r != nullptr) ranges = parse_cluster_slots(*r);
    if (!ranges) return request_refresh();
    std::array<node*, cluster_slots> next{};
    for (const auto& range : *ranges) {
      node* n =
          node_for(range.host.empty() ? asked->config().endpoint.host : range.host, range.port);
      for (int s = range.first; s <= range.last; ++s) next[static_cast<std::size_t>(s)] = n;
    }
    std::set<node*> owns;
    for (node* n : next)
      if (n) owns.insert(n);
    // A node that held slots and holds none now: its replica took over (or it was drained).
    for (node* n : masters_)
      if (owns.count(n) == 0) pool_.health().failovers_seen.fetch_add(1, std::memory_order_relaxed);
    masters_ = owns;
    slots_ = next;
    map_complete_ = std::all_of(next.begin(), next.end(), [](node* n) { return n != nullptr; });
    retire_departed();
    update_health();
  }

 private:
  // --- nodes -------------------------------------------------------------------------------

  // A node of the cluster: the seeds' credentials and TLS, db 0.
  node* node_for(const std::string& host, std::uint16_t port) {
    redis_endpoint ep = credentials_;
    ep.host = host;
    ep.port = port;
    ep.db = 0;
    return pool_.node_for(ep);
  }

  // Nodes that left the map (not masters now, not seeds) and hold no calls stop connecting:
  // with pod churn, every host:port ever learned would otherwise reconnect forever. One that
  // still holds calls is looked at again on the next refresh; one learned again later (a
  // MOVED or ASK to it) is made anew.
  void retire_departed() {
    std::vector<node*> departed;
    for (const auto& [name, n] : pool_.nodes()) {
      const bool seed = std::find(seeds_.begin(), seeds_.end(), n.get()) != seeds_.end();
      if (!seed && masters_.count(n.get()) == 0 && !n->busy()) departed.push_back(n.get());
    }
    for (node* n : departed) pool_.retire(*n, steady::now());
    pool_.sweep();
    pool_.health().nodes_retired.store(pool_.retired_count(), std::memory_order_relaxed);
  }

  // The nodes with a ready connection; failing that, those with a connecting one.
  std::vector<node*> usable() const {
    std::vector<node*> out;
    for (const auto& [name, n] : pool_.nodes())
      if (n->ready() > 0) out.push_back(n.get());
    if (out.empty())
      for (const auto& [name, n] : pool_.nodes())
        if (n->pick()) out.push_back(n.get());
    return out;
  }

  // Before the map is known, or for a slot it lacks: any usable node (it answers MOVED for
  // slots it does not serve).
  node* any_node() {
    const auto nodes = usable();
    return nodes.empty() ? nullptr : nodes.front();
  }

  // --- routing -----------------------------------------------------------------------------

  // A call a node completed goes again: admitted afresh by the next node (route()), and
  // alone, never batched: a batch whose keys are partly on a node mid-migration is answered
  // TRYAGAIN, and would be again for as long as the migration lasts. Another node has another
  // script cache. (ASKING stays for a TRYAGAIN after an ASK.)
  static void again(request& c) noexcept {
    c.observer = nullptr;
    c.probe = false;
    c.part = {};
    c.noscript_replies = 0;
  }

  // --- slot map ----------------------------------------------------------------------------

  // At most one CLUSTER SLOTS in flight, and one per refresh_min_interval; always from a
  // timer, never inside a connection's callback.
  void request_refresh() {
    if (pool_.torn_down() || refresh_in_flight_ || refresh_timer_.armed()) return;
    refresh_timer_.at(std::max(steady::now(), last_refresh_ + refresh_min_interval), [this] {
      if (!pool_.torn_down()) start_refresh();
    });
  }

  void start_refresh() {
    // Round-robin over usable nodes, so one stale node cannot keep feeding us its view.
    const auto candidates = usable();
    last_refresh_ = steady::now();
    if (candidates.empty()) return request_refresh();
    node* n = candidates[refresh_cursor_++ % candidates.size()];
    connection* c = n->pick();
    if (c == nullptr) return request_refresh();
    // CLUSTER SLOTS, sent by the client itself.
    auto call = on_reply([this, n](std::error_code ec, reply* r) { on_slots(n, ec, r); });
    append_command(call->command, {"CLUSTER", "SLOTS"});
    call->deadline = steady::now() + pool_.options().connect_timeout;
    refresh_in_flight_ = true;
    c->enqueue(std::move(call));
    c->flush();
  }

  // While some slot has no reachable master, look again now and then (a failover finishes
  // without any call noticing, and readiness probes want to know).
  void tick() {
    tick_timer_.after(unhealthy_refresh_interval, [this] {
      if (pool_.torn_down()) return;
      if (!healthy() || steady::now() - last_refresh_ >= periodic_refresh_interval)
        request_refresh();
      tick();
    });
  }

  // Healthy: every slot's master reachable, its breaker closed (and, pool_client says, no
  // node failing for a reason that will not heal).
  void update_health() {
    pool_.health().nodes_known.store(pool_.nodes().size(), std::memory_order_relaxed);
    bool ok = map_complete_;
    for (node* n : masters_)
      if (n->ready() == 0 || !n->breaker_closed()) ok = false;
    healthy_.store(ok, std::memory_order_relaxed);
  }

  const redis_endpoint credentials_;  // user, password (and TLS) for every node
  std::set<node*> masters_;           // the nodes owning slots in the current map
  std::vector<node*> seeds_;
  std::array<node*, cluster_slots> slots_{};
  bool map_complete_ = false;

  timer refresh_timer_;
  timer tick_timer_;
  bool refresh_in_flight_ = false;
  steady::time_point last_refresh_{};
  std::size_t refresh_cursor_ = 0;
};

}  // namespace

std::unique_ptr<transport> make_cluster_client(std::vector<redis_endpoint> seeds,
                                               const redis_options& options, script_set scripts) {
  validate_options(options);
  if (seeds.empty()) throw config_error("redis+cluster: no seed nodes");
  return start_client<cluster_client>(std::move(seeds), options, std::move(scripts));
}

}  // namespace floodgate::redis
