// Everything a library user needs: #include <floodgate/floodgate.hpp>.
#pragma once

#include "floodgate/backend.hpp"
#include "floodgate/decision.hpp"
#include "floodgate/errors.hpp"
#include "floodgate/limiter.hpp"
#include "floodgate/options.hpp"
#include "floodgate/policy.hpp"
#include "floodgate/semaphore.hpp"
