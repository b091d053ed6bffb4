#include "floodgate/errors.hpp"

#include "floodgate/decision.hpp"

namespace floodgate {
namespace {

class category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "floodgate"; }
  std::string message(int ev) const override {
    switch (static_cast<errc>(ev)) {
      case errc::empty_key: return "empty key";
      case errc::key_too_long: return "key longer than the limiter's max_key_size";
      case errc::invalid_cost: return "cost must be an integer >= 0";
      case errc::cost_exceeds_limit: return "cost exceeds the policy's capacity: it can never be admitted";
      case errc::too_many_items: return "check_all with more items than max_items";
      case errc::duplicate_item: return "check_all names the same (policy, key) twice";
      case errc::no_items: return "check_all with no items";
      case errc::unsupported: return "the backend does not support this call";
      case errc::invalid_lease: return "not a lease id (1..64 bytes)";
      case errc::invalid_idempotency_key:
        return "not an idempotency key (1..64 of A-Z a-z 0-9 _ . : -)";
      case errc::cross_slot:
        return "check_all items live in different Redis Cluster slots (use one caller key for "
               "all items)";
      case errc::timeout: return "backend did not answer within the deadline";
      case errc::not_connected: return "backend not connected";
      case errc::server_busy: return "backend busy (BUSY: a script runs too long)";
      case errc::out_of_memory: return "backend out of memory (OOM)";
      case errc::server_error: return "backend replied with an error";
      case errc::protocol_error: return "backend reply could not be parsed";
      case errc::shutting_down: return "backend is shutting down";
      case errc::internal_error: return "backend failed internally (an exception, e.g. out of memory)";
    }
    return "unknown floodgate error";
  }
};

}  // namespace

const std::error_category& error_category() noexcept {
  static const category c;
  return c;
}

const char* to_string(outcome o) noexcept {
  switch (o) {
    case outcome::allowed: return "allowed";
    case outcome::over_limit: return "over_limit";
    case outcome::backend_error: return "backend_error";
    case outcome::invalid_request: return "invalid_request";
  }
  return "unknown";
}

}  // namespace floodgate
