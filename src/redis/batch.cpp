#include "redis/batch.hpp"

#include <string_view>

#include "floodgate/errors.hpp"
#include "redis/resp_writer.hpp"
#include "redis/scripts.hpp"

namespace floodgate::redis {
namespace {

std::string_view slice(const request& r, std::size_t from, std::size_t to) noexcept {
  return std::string_view(r.command).substr(from, to - from);
}
std::string_view key_of(const request& r) noexcept {
  return slice(r, r.part.key, r.part.args);
}
std::string_view args_of(const request& r) noexcept {  // limit, window_ms, burst, cost
  return slice(r, r.part.args, r.part.now);
}
std::string_view now_of(const request& r) noexcept {
  return std::string_view(r.command).substr(r.part.now);
}

}  // namespace

void request::complete_part(std::span<reply> decision) noexcept {
  reply r;
  r.kind = reply::type::array;
  r.elements.assign(std::make_move_iterator(decision.begin()),
                    std::make_move_iterator(decision.end()));
  complete({}, &r);
}

bool can_share(const request& first, const request& r) noexcept {
  return first.slot == r.slot && now_of(first) == now_of(r);
}

std::size_t batch_item_size(const request& r) noexcept {
  return key_of(r).size() + args_of(r).size() + bulk_size(r.script->name.size());
}

void append_batch(std::string& out, std::span<const request_ptr> items, bool as_eval) {
  const script& s = batch_script();
  const std::size_t n = items.size();
  append_array_header(out, 3 + n + 1 + 5 * n);
  if (as_eval) {
    append_bulk(out, "EVAL");
    append_bulk(out, s.source);
  } else {
    append_bulk(out, "EVALSHA");
    append_bulk(out, s.sha1);
  }
  append_bulk(out, static_cast<std::int64_t>(n));
  for (const auto& r : items) out.append(key_of(*r));
  out.append(now_of(*items.front()));
  for (const auto& r : items) {
    append_bulk(out, r->script->name);
    out.append(args_of(*r));
  }
}

void complete_batch(std::span<request_ptr> items, reply& r) noexcept {
  if (r.is_error()) {
    const auto ec = error_for(r);
    for (auto& item : items)
      if (item) item->complete(ec, &r);
    return;
  }
  if (r.kind != reply::type::array || r.elements.size() != 5 * items.size()) {
    for (auto& item : items)
      if (item) item->complete(errc::protocol_error, &r);
    return;
  }
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (!items[i]) continue;
    std::span<reply> part(&r.elements[5 * i], 5);
    if (part[0].is_error())
      items[i]->complete(error_for(part[0]), &part[0]);
    else
      items[i]->complete_part(part);
  }
}

}  // namespace floodgate::redis
