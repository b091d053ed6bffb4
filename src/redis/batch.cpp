#include "redis/batch.hpp"

#include <string_view>

#include "floodgate/errors.hpp"
#include "redis/resp_writer.hpp"
#include "redis/script_decision.hpp"

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

// Whether `b` continues the run of `a`: the same algorithm, limit, window, burst and cost.
bool same_run(const request& a, const request& b) noexcept {
  return a.script == b.script && args_of(a) == args_of(b);
}

}  // namespace

void request::complete_part(const decision&) noexcept {
  complete(errc::protocol_error, nullptr);
}

bool can_share(const request& first, const request& r) noexcept {
  return first.slot == r.slot && now_of(first) == now_of(r);
}

std::size_t batch_item_size(const request& r) noexcept {
  return key_of(r).size() + args_of(r).size() + bulk_size(r.script->name.size());
}

void append_batch(std::string& out, const script& s, std::span<const request_ptr> items,
                  script_call form) {
  const std::size_t n = items.size();
  std::size_t runs = 1;
  for (std::size_t i = 1; i < n; ++i) runs += !same_run(*items[i - 1], *items[i]);
  append_array_header(out, 3 + n + 1 + 6 * runs);
  append_script_head(out, s, form);
  append_bulk(out, static_cast<std::int64_t>(n));
  for (const auto& r : items) out.append(key_of(*r));
  out.append(now_of(*items.front()));
  for (std::size_t i = 0; i < n;) {
    std::size_t end = i + 1;
    while (end < n && same_run(*items[i], *items[end])) ++end;
    append_bulk(out, items[i]->script->name);
    out.append(args_of(*items[i]));
    append_bulk(out, static_cast<std::int64_t>(end - i));
    i = end;
  }
}

void complete_batch(std::span<request_ptr> items, reply& r) noexcept {
  if (r.is_error()) {
    const auto ec = error_for(r);
    for (auto& item : items)
      if (item) request::finish(std::move(item), ec, &r);
    return;
  }
  const auto is_integer = [&](std::size_t at) {
    return at < r.elements.size() && r.elements[at].kind == reply::type::integer;
  };
  std::size_t at = 0, i = 0;
  if (r.kind == reply::type::array) {
    for (; i < items.size(); ++i) {
      if (at < r.elements.size() && r.elements[at].is_error()) {
        if (items[i])
          request::finish(std::move(items[i]), error_for(r.elements[at]), &r.elements[at]);
        ++at;
        continue;
      }
      if (!is_integer(at) || !is_integer(at + 1)) break;
      const std::int64_t first = r.elements[at].integer;
      const bool allowed = first >= 0;
      if (!allowed && !is_integer(at + 2)) break;
      const auto d = script_decision(allowed, items[i] ? items[i]->part.capacity : 0,
                                     allowed ? first : -1 - first, r.elements[at + 1].integer,
                                     allowed ? 0 : r.elements[at + 2].integer);
      if (!d) break;
      at += allowed ? 2 : 3;
      if (items[i]) request::finish_part(std::move(items[i]), *d);
    }
  }
  if (i == items.size() && at == r.elements.size()) return;
  // A reply of another shape: what is left cannot be matched to its items.
  for (; i < items.size(); ++i)
    if (items[i]) request::finish(std::move(items[i]), errc::protocol_error, &r);
}

}  // namespace floodgate::redis
