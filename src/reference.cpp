#include "floodgate/reference.hpp"

#include "core/step.hpp"

namespace floodgate {

struct reference_key::state {
  core::params params;
  core::any_state value;
};

reference_key::reference_key(const policy& p)
    : state_(std::make_unique<state>(state{core::params::of(p), core::empty_state(p.algo())})) {}

reference_key::~reference_key() = default;
reference_key::reference_key(reference_key&&) noexcept = default;
reference_key& reference_key::operator=(reference_key&&) noexcept = default;

decision reference_key::decide(std::int64_t now_ms, std::int64_t cost) const {
  return core::decide(state_->value, now_ms, state_->params, cost);
}

void reference_key::record(std::int64_t now_ms, std::int64_t cost) {
  core::commit(state_->value, now_ms, state_->params, cost);
}

}  // namespace floodgate
