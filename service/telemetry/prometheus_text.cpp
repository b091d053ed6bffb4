#include "telemetry/prometheus_text.hpp"

#include <cmath>
#include <cstdio>

namespace floodgate::service {
namespace {

std::string_view type_name(metric_type t) {
  switch (t) {
    case metric_type::counter:
      return "counter";
    case metric_type::gauge:
      return "gauge";
    case metric_type::histogram:
      return "histogram";
  }
  return "untyped";
}

// Help text escapes backslash and newline; label values double quotes too.
void append_escaped(std::string& out, std::string_view s, bool quote) {
  for (char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else if (c == '"' && quote)
      out += "\\\"";
    else
      out += c;
  }
}

// name="value"
void append_label(std::string& out, const metric_label& l) {
  out.append(l.name).append("=\"");
  append_escaped(out, l.value, true);
  out += '"';
}

}  // namespace

void append_prometheus_number(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
  } else if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
  } else {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    out += buf;
  }
}

prometheus_family::prometheus_family(std::string& out, std::string_view name, metric_type type,
                                     std::string_view help)
    : out_(out), name_(name) {
  out_.append("# HELP ").append(name).append(" ");
  append_escaped(out_, help, false);
  out_.append("\n# TYPE ").append(name).append(" ").append(type_name(type)).append("\n");
}

void prometheus_family::start(metric_labels labels, std::string_view suffix) {
  out_.append(name_).append(suffix);
  if (labels.size() != 0) {
    char sep = '{';
    for (const auto& l : labels) {
      out_ += sep;
      append_label(out_, l);
      sep = ',';
    }
    out_ += '}';
  }
  out_ += ' ';
}

void prometheus_family::sample(metric_labels labels, double value) {
  start(labels);
  append_prometheus_number(out_, value);
  out_ += '\n';
}

void prometheus_family::histogram(metric_labels labels, std::span<const double> bounds,
                                  std::span<const std::uint64_t> counts, double sum) {
  std::uint64_t cumulative = 0;
  for (std::size_t b = 0; b <= bounds.size(); ++b) {
    cumulative += b < counts.size() ? counts[b] : 0;
    out_.append(name_).append("_bucket{");
    for (const auto& l : labels) {
      append_label(out_, l);
      out_ += ',';
    }
    out_.append("le=\"");
    if (b < bounds.size())
      append_prometheus_number(out_, bounds[b]);
    else
      out_.append("+Inf");
    out_.append("\"} ").append(std::to_string(cumulative)).append("\n");
  }
  start(labels, "_sum");
  append_prometheus_number(out_, sum);
  out_ += '\n';
  start(labels, "_count");
  out_.append(std::to_string(cumulative)).append("\n");
}

}  // namespace floodgate::service
