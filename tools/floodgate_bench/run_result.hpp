// What a run measured, per thread, per process, and in total: counts, the latency histogram
// and the admission record. Results add up (merge), and travel from a worker process to the
// parent as bytes (both ends are this same binary, so the layout is shared).
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "admission.hpp"
#include "decision_record.hpp"
#include "histogram.hpp"

namespace floodgate::bench {

struct run_result {
  std::uint64_t allowed = 0;
  std::uint64_t denied = 0;
  std::uint64_t errors = 0;
  std::uint64_t reserved = 0;  // of allowed: answered from reserved units (--reserve)
  histogram latency_us;        // send to answer (service time), every decision
  // Open loop: from the intended send time to the answer (a request that waited for a slot
  // counts its wait), every decision; and the requests dropped after waiting --max-lag.
  histogram corrected_latency_us;
  std::uint64_t dropped = 0;
  // --algorithm concurrency (allowed: leases granted, denied: refused): leases released, and
  // lost (the release found nothing: the lease had expired); a failed release is an error.
  std::uint64_t released = 0;
  std::uint64_t lost = 0;
  std::vector<admission> admissions;
  // --replay: the decisions recorded, and the ms from which the record may be partial (the
  // earliest decision a full thread left out; every decision before it is recorded).
  std::vector<decision_record> decision_log;
  std::int64_t decision_log_cutoff_ms = std::numeric_limits<std::int64_t>::max();
  std::int64_t started_us = 0;   // wall clock, µs since the epoch: the agreed start
  std::int64_t finished_us = 0;  // the last answer
  std::string first_error;       // one example, for the summary

  std::uint64_t decisions() const noexcept { return allowed + denied; }
  void merge(const run_result& other);

  std::string serialize() const;
  // Throws std::runtime_error on malformed bytes.
  static run_result deserialize(std::string_view bytes);
};

}  // namespace floodgate::bench
