// Envoy's RLS v3 protobuf messages to and from rls_service's plain structs, and the health
// service's: what a gRPC call's bytes mean. grpc_connection.cpp is the only user.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "rls_service.hpp"

namespace floodgate::service::envoy {

// A serialized RateLimitRequest; none: the bytes are not one.
std::optional<request> parse_rls_request(std::string_view bytes);
// The same, into `out`, whose memory (its descriptors' and their entries' vectors) is reused;
// false: the bytes are not one (`out` then holds what was read of them).
bool parse_rls_request(std::string_view bytes, request& out);
// A serialized RateLimitResponse.
std::string serialize_rls_response(const response& r);
// The same, appended to `out` (a buffer kept between calls: no allocation per answer).
void serialize_rls_response(const response& r, std::string& out);
// A serialized HealthCheckRequest's service name; none: the bytes are not one.
std::optional<std::string> parse_health_request(std::string_view bytes);
// A serialized HealthCheckResponse: SERVING or NOT_SERVING.
std::string serialize_health_response(bool serving);

}  // namespace floodgate::service::envoy
