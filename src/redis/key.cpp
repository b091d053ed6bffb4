#include "redis/key.hpp"

#include "core/state_unit.hpp"
#include "redis/resp_writer.hpp"
#include "redis/sha256.hpp"

namespace floodgate::redis {
namespace {

constexpr std::size_t hashed_size = 1 + 64;  // '#' and 64 hex digits

// The algorithm's part of the key: a short code, so a key of at most 44 bytes with an integer
// value is 88 bytes of Redis memory, one of 45 to 60 bytes is 104 (docs/algorithms.md, "Redis
// representation"). A code changes with its state's layout, so an older floodgate's state is
// never misread: `sl` replaced `sliding_log` (one member per unit), `gc`/`tb` with units
// replaced the plain codes, and those replaced the hashes under the full names; `gt` replaced
// `gc` when gcra's TAT became one integer in units of the reduced interval.
std::string_view key_code(algorithm a) noexcept {
  switch (a) {
    case algorithm::sliding_log: return "sl";
    case algorithm::sliding_window: return "sw";
    case algorithm::fixed_window: return "fw";
    case algorithm::token_bucket: return "tb";
    case algorithm::gcra: return "gt";
  }
  return "?";
}

// The hash tag ":{...}" of a caller key whose form (stored_as_hash) is decided already.
std::size_t tag_size(std::string_view caller_key, bool hashed) noexcept {
  return 2 + (hashed ? hashed_size : caller_key.size()) + 1;
}

void append_tag(std::string& out, std::string_view caller_key, bool hashed) {
  out.append(":{");
  if (hashed)
    out.append("#").append(sha256_hex(caller_key));
  else
    out.append(caller_key);
  out.append("}");
}

bool hashed(const key_format& f, std::string_view caller_key) noexcept {
  return stored_as_hash(caller_key, f.max_plain_key_size);
}

std::size_t state_head_size(const key_format& f, const policy& p) noexcept {
  return f.prefix.size() + p.name().size() + 1 + key_code(p.algo()).size() +
         core::state_unit(p).view().size();
}

void append_state_head(std::string& out, const key_format& f, const policy& p) {
  out.append(f.prefix).append(p.name()).append(":").append(key_code(p.algo()));
  out.append(core::state_unit(p).view());
}

std::size_t block_head_size(const key_format& f, const policy& p) noexcept {
  return f.prefix.size() + p.name().size() + 3;  // ":bk"
}

void append_block_head(std::string& out, const key_format& f, const policy& p) {
  out.append(f.prefix).append(p.name()).append(":bk");
}

}  // namespace

bool stored_as_hash(std::string_view caller_key, std::size_t max_plain_key_size) noexcept {
  // Two find(char)s are two memchr scans; find_first_of("{}") was a memchr per character.
  return caller_key.size() > max_plain_key_size || caller_key.starts_with('#') ||
         caller_key.find('{') != std::string_view::npos ||
         caller_key.find('}') != std::string_view::npos;
}

std::size_t state_key_size(const key_format& f, const policy& p,
                           std::string_view caller_key) noexcept {
  return state_head_size(f, p) + tag_size(caller_key, hashed(f, caller_key));
}

void append_state_key(std::string& out, const key_format& f, const policy& p,
                      std::string_view caller_key) {
  append_state_head(out, f, p);
  append_tag(out, caller_key, hashed(f, caller_key));
}

std::size_t block_key_size(const key_format& f, const policy& p,
                           std::string_view caller_key) noexcept {
  return block_head_size(f, p) + tag_size(caller_key, hashed(f, caller_key));
}

void append_block_key(std::string& out, const key_format& f, const policy& p,
                      std::string_view caller_key) {
  append_block_head(out, f, p);
  append_tag(out, caller_key, hashed(f, caller_key));
}

void append_state_key_bulk(std::string& out, const key_format& f, const policy& p,
                           std::string_view caller_key) {
  const bool h = hashed(f, caller_key);
  append_bulk_header(out, state_head_size(f, p) + tag_size(caller_key, h));
  append_state_head(out, f, p);
  append_tag(out, caller_key, h);
  out.append("\r\n");
}

void append_block_key_bulk(std::string& out, const key_format& f, const policy& p,
                           std::string_view caller_key) {
  const bool h = hashed(f, caller_key);
  append_bulk_header(out, block_head_size(f, p) + tag_size(caller_key, h));
  append_block_head(out, f, p);
  append_tag(out, caller_key, h);
  out.append("\r\n");
}

std::string lease_key(const key_format& f, const concurrency_policy& p,
                      std::string_view caller_key) {
  std::string out;
  out.append(f.prefix).append(p.name()).append(":cc");
  append_tag(out, caller_key, hashed(f, caller_key));
  return out;
}

std::string state_key(const key_format& f, const policy& p, std::string_view caller_key) {
  std::string out;
  out.reserve(state_key_size(f, p, caller_key));
  append_state_key(out, f, p, caller_key);
  return out;
}

}  // namespace floodgate::redis
