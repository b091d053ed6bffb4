// One parsed RESP2 reply, as a small tree. Produced by resp_reader, consumed by the client
// and the backend; owns its data. The same type the public redis_caller answers with
// (floodgate/redis_call.hpp), so a reply is handed on as it is.
#pragma once

#include "floodgate/redis_call.hpp"

namespace floodgate::redis {

using reply = redis_value;

}  // namespace floodgate::redis
