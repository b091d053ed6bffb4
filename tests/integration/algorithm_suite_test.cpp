// The algorithm suite (tests/support/algorithm_suite.hpp) on a real Redis: the same tests,
// the same hand-derived boundary tables as on the memory backend, now run by the Lua scripts.
#include "algorithm_suite.hpp"

namespace floodgate::test {
namespace {

redis_env redis;

INSTANTIATE_TEST_SUITE_P(redis, algorithm_suite, ::testing::ValuesIn(all_algorithms(&redis)),
                         param_name);
INSTANTIATE_TEST_SUITE_P(redis, boundary_suite, ::testing::Values(&redis), env_name);
INSTANTIATE_TEST_SUITE_P(redis, lease_suite, ::testing::Values(&redis), env_name);

}  // namespace
}  // namespace floodgate::test
