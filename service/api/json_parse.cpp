#include "api/json_parse.hpp"

#include <boost/json/basic_parser_impl.hpp>
#include <boost/json/value_stack.hpp>
#include <string>
#include <unordered_set>
#include <vector>

namespace floodgate::service {
namespace {

namespace json = boost::json;

// The member names of one object, to refuse a second use of one. A request's objects have a
// few members: those are scanned. Past `few`, a hash set holds them all, so a body of many
// members costs linear time, not quadratic (3,905 members: ~30 ms of an I/O thread scanned).
class member_names {
 public:
  static constexpr std::size_t few = 16;

  // False when `name` was given already (it is left as it was); else it is taken.
  bool add(std::string& name) {
    if (many_.empty()) {
      for (const auto& seen : few_)
        if (seen == name) return false;
      if (few_.size() < few) {
        few_.push_back(std::move(name));
        return true;
      }
      for (auto& seen : few_) many_.insert(std::move(seen));
      few_.clear();
    }
    if (many_.contains(name)) return false;
    many_.insert(std::move(name));
    return true;
  }

 private:
  std::vector<std::string> few_;
  std::unordered_set<std::string> many_;
};

// Boost.JSON's own value-building handler, plus the member names of each open object.
struct strict_handler {
  static constexpr std::size_t max_object_size = json::object::max_size();
  static constexpr std::size_t max_array_size = json::array::max_size();
  static constexpr std::size_t max_key_size = json::string::max_size();
  static constexpr std::size_t max_string_size = json::string::max_size();

  json::value_stack st;
  std::vector<member_names> names;  // one entry per open object
  std::string key;                  // a key arriving in parts
  std::optional<std::string> duplicate;

  static bool refuse(json::error_code& ec) {
    ec = json::error::syntax;  // replaced by `duplicate` in the message
    return false;
  }

  bool on_document_begin(json::error_code&) { return true; }
  bool on_document_end(json::error_code&) { return true; }
  bool on_object_begin(json::error_code&) {
    names.emplace_back();
    return true;
  }
  bool on_object_end(std::size_t n, json::error_code&) {
    names.pop_back();
    st.push_object(n);
    return true;
  }
  bool on_array_begin(json::error_code&) { return true; }
  bool on_array_end(std::size_t n, json::error_code&) {
    st.push_array(n);
    return true;
  }
  bool on_key_part(json::string_view s, std::size_t, json::error_code&) {
    key.append(s.data(), s.size());
    st.push_chars(s);
    return true;
  }
  bool on_key(json::string_view s, std::size_t, json::error_code& ec) {
    key.append(s.data(), s.size());
    if (!names.back().add(key)) {
      duplicate = std::move(key);
      return refuse(ec);
    }
    key.clear();
    st.push_key(s);
    return true;
  }
  bool on_string_part(json::string_view s, std::size_t, json::error_code&) {
    st.push_chars(s);
    return true;
  }
  bool on_string(json::string_view s, std::size_t, json::error_code&) {
    st.push_string(s);
    return true;
  }
  bool on_number_part(json::string_view, json::error_code&) { return true; }
  bool on_int64(std::int64_t i, json::string_view, json::error_code&) {
    st.push_int64(i);
    return true;
  }
  bool on_uint64(std::uint64_t u, json::string_view, json::error_code&) {
    st.push_uint64(u);
    return true;
  }
  bool on_double(double d, json::string_view, json::error_code&) {
    st.push_double(d);
    return true;
  }
  bool on_bool(bool b, json::error_code&) {
    st.push_bool(b);
    return true;
  }
  bool on_null(json::error_code&) {
    st.push_null();
    return true;
  }
  bool on_comment_part(json::string_view, json::error_code&) { return true; }
  bool on_comment(json::string_view, json::error_code&) { return true; }
};

}  // namespace

std::optional<std::string> parse_json_strict(std::string_view text, std::size_t max_depth,
                                             json::value& out) {
  json::parse_options options;
  options.max_depth = max_depth;
  json::basic_parser<strict_handler> p(options);
  p.handler().st.reset();
  json::error_code ec;
  const auto n = p.write_some(false, text.data(), text.size(), ec);
  if (p.handler().duplicate)
    return "duplicate field '" + p.handler().duplicate->substr(0, 64) + "'";
  if (!ec && n != text.size()) ec = json::error::extra_data;
  if (ec) return "malformed JSON: " + ec.message();
  out = p.handler().st.release();
  return std::nullopt;
}

}  // namespace floodgate::service
