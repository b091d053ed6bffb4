// The algorithm suite (tests/support/algorithm_suite.hpp) on the in-process memory backend.
#include "algorithm_suite.hpp"

namespace floodgate::test {
namespace {

memory_env memory;

INSTANTIATE_TEST_SUITE_P(memory, algorithm_suite, ::testing::ValuesIn(all_algorithms(&memory)),
                         param_name);
INSTANTIATE_TEST_SUITE_P(memory, boundary_suite, ::testing::Values(&memory), env_name);
INSTANTIATE_TEST_SUITE_P(memory, lease_suite, ::testing::Values(&memory), env_name);

}  // namespace
}  // namespace floodgate::test
