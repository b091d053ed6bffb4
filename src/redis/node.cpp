#include "redis/node.hpp"

#include <utility>

#include "floodgate/errors.hpp"
#include "redis/node_pool.hpp"
#include "redis/url.hpp"

namespace floodgate::redis {

node::node(node_pool& pool, connection_config config)
    : config_(std::move(config)),
      name_(endpoint_label(config_.endpoint)),
      pool_(pool),
      health_(pool.health()),
      breaker_(config_.options.breaker_failures, config_.options.breaker_open_for),
      probe_timer_(pool.context()) {
  connections_.reserve(config_.options.connections);
  for (std::size_t i = 0; i < config_.options.connections; ++i)
    connections_.push_back(std::make_unique<connection>(pool.context(), config_, *this));
}

void node::start() {
  for (auto& c : connections_)
    if (c->current_state() == connection::state::idle) c->start();
}

void node::stop(std::vector<request_ptr>& out) {
  for (auto& c : connections_) c->stop(out);
  ready_.store(0, std::memory_order_relaxed);
  leave();
}

void node::leave() {
  if (stopped_) return;
  if (has_problem_) clear_problem();
  if (!breaker_.closed()) health_.breakers_open.fetch_sub(1, std::memory_order_relaxed);
  probe_timer_.cancel();
  stopped_ = true;
}

connection* node::pick() {
  connection* best = nullptr;
  bool best_ready = false;
  for (auto& c : connections_) {
    const auto state = c->current_state();
    if (state != connection::state::ready && state != connection::state::connecting) continue;
    if (c->pending() >= config_.options.max_pending_per_connection) continue;
    const bool ready = state == connection::state::ready;
    if (best == nullptr || (ready && !best_ready) ||
        (ready == best_ready && c->pending() < best->pending())) {
      best = c.get();
      best_ready = ready;
    }
  }
  return best;
}

bool node::admit(bool& probe) {
  return breaker_.allows(request::clock::now(), probe);
}

void node::not_sent(bool probe) noexcept {
  if (probe) breaker_.probe_not_sent();
}

void node::arm_probe() {
  probe_timer_.after(config_.options.breaker_open_for, [this] { send_probe(); });
}

void node::send_probe() {
  if (stopped_ || breaker_.closed() || pinging_) return;
  // Nobody waits for its answer: only the breaker hears it (finished).
  auto ping = on_reply([](std::error_code, reply*) {});
  ping->command = "*1\r\n$4\r\nPING\r\n";
  ping->deadline = request::clock::now() + config_.options.timeout;
  ping->breaker_ping = true;
  // Not sent (still open, a caller's probe on its way, no connection): try again later.
  if (!pool_.send(std::move(ping), *this)) return arm_probe();
  pinging_ = true;
  pool_.flush();
}

void request::finish(request_ptr r, std::error_code ec, reply* answer) noexcept {
  if (r->observer != nullptr) r->observer->finished(*r, ec);
  if (call_router* by = r->route.by) return by->call_done(std::move(r), ec, answer);
  r->complete(ec, answer);
}

void request::finish_part(request_ptr r, const decision& d) noexcept {
  if (r->observer != nullptr) r->observer->finished(*r, {});
  r->complete_part(d);
}

void node::finished(const request& r, std::error_code ec) noexcept {
  const bool probe = r.probe, ping = r.breaker_ping;
  if (ping) pinging_ = false;  // answered or not, the next PING may go
  if (stopped_) return;        // calls handed back by stop(): the node's gauges are settled
  // The node's own PING does not run the scripts: a lasting problem (NOPERM on them) waits for a
  // call answered.
  if (!ec && !ping && std::exchange(answered_, false)) clear_problem();
  const bool no_answer = ec == errc::timeout || ec == errc::not_connected;
  const auto change =
      no_answer ? breaker_.no_answer(probe, request::clock::now()) : breaker_.answered(probe);
  if (change == breaker::change::opened || (no_answer && probe)) arm_probe();
  if (change == breaker::change::none) return;
  if (change == breaker::change::opened) {
    health_.breaker_opens.fetch_add(1, std::memory_order_relaxed);
    health_.breakers_open.fetch_add(1, std::memory_order_relaxed);
    // The node said nothing: the breaker is what the operator is told.
    problem("circuit breaker open: " + std::to_string(config_.options.breaker_failures) +
                " calls in a row got no answer; calls fail at once for " +
                std::to_string(config_.options.breaker_open_for.count()) + " ms, then one probe",
            false);
  } else {
    // Closed by the PING: what the node had to tell that is not lasting (the breaker itself,
    // timeouts) is over, as when a connection becomes ready again.
    if (ping && has_problem_ && !problem_lasting_) clear_problem();
    health_.breakers_open.fetch_sub(1, std::memory_order_relaxed);
  }
  pool_.router().breaker_changed(*this, change);
}

bool node::busy() const noexcept {
  for (const auto& c : connections_)
    if (c->pending() > 0) return true;
  return false;
}

bool node::owns(const connection* c) const noexcept {
  for (const auto& own : connections_)
    if (own.get() == c) return true;
  return false;
}

void node::readiness_changed(bool ready) {
  ready_.fetch_add(ready ? 1 : -1, std::memory_order_relaxed);
  // Connecting works again; a node no call is routed to (a replica among the seeds) would
  // otherwise keep telling its old connect failure. What is lasting waits for an answer.
  if (ready && has_problem_ && !problem_lasting_) clear_problem();
  pool_.router().readiness_changed(*this, ready);
}

void node::redispatch(std::vector<request_ptr> requests) {
  for (auto& r : requests) {  // admitted here, never sent
    not_sent(r->probe);
    r->observer = nullptr;
    r->probe = false;
  }
  // The node's own PING (its connection went before sending it) is for this node only: dropped,
  // and sent again when the breaker's time is up.
  std::erase_if(requests, [this](request_ptr& r) {
    if (!r->breaker_ping) return false;
    r->complete(errc::not_connected, nullptr);
    pinging_ = false;
    arm_probe();
    return true;
  });
  pool_.redispatch(std::move(requests));
}

void node::script_reloaded() noexcept {
  health_.script_reloads.fetch_add(1, std::memory_order_relaxed);
}

void node::problem(const std::string& why, bool lasting) {
  constexpr std::string_view call = "call: ";
  if (stopped_ || (why.starts_with(call) &&
                   pool_.router().routing_reply(std::string_view(why).substr(call.size()))))
    return;
  health_.set_problem(this, name_ + ": " + why, lasting);
  problem_lasting_ = problem_lasting_ || lasting;  // as pool_health keeps it
  has_problem_ = true;
  answered_ = false;
}

void node::clear_problem() {
  has_problem_ = problem_lasting_ = answered_ = false;
  health_.clear_problem(this);
}

// Only a call the client routed clears the problem (finished()): an ACL that refuses the
// scripts still lets a Cluster's own CLUSTER SLOTS be answered.
void node::call_succeeded() noexcept {
  if (has_problem_) answered_ = true;
}

}  // namespace floodgate::redis
