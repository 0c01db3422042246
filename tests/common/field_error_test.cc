#include "starforge/common/field_error.h"

#include <gtest/gtest.h>

namespace starforge {
namespace {

TEST(FieldErrorTest, ToStringAndJoin) {
  const FieldErrors errors = {{"pools[1].gpusPerMachine", "must be ≥ 0, got -1"},
                              {"", "syntax error: line 1, column 2: x"}};
  EXPECT_EQ(errors[0].ToString(), "pools[1].gpusPerMachine: must be ≥ 0, got -1");
  EXPECT_EQ(errors[1].ToString(), "syntax error: line 1, column 2: x");
  EXPECT_EQ(JoinErrors(errors),
            "pools[1].gpusPerMachine: must be ≥ 0, got -1\nsyntax error: line 1, column 2: x");
  EXPECT_EQ(JoinErrors({}), "");
}

}  // namespace
}  // namespace starforge
