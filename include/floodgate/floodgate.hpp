// Everything a library user needs: #include <floodgate/floodgate.hpp>. Asio completion tokens
// and coroutines are opt-in, in <floodgate/asio.hpp> (it needs the Boost headers).
#pragma once

#include "floodgate/backend.hpp"
#include "floodgate/decision.hpp"
#include "floodgate/errors.hpp"
#include "floodgate/limiter.hpp"
#include "floodgate/options.hpp"
#include "floodgate/policy.hpp"
#include "floodgate/reference.hpp"
#include "floodgate/semaphore.hpp"
