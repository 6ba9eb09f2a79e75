// The NCCL loader without a GPU: a library that is missing or is not NCCL is skipped with the
// reason in the error, which lists every candidate tried; $DEEPINFER_NCCL_LIBRARY comes first;
// a group over no devices is an error before NCCL is touched.
#include <gtest/gtest.h>

#include <cstdlib>

#include "lib/Nccl.h"

namespace deepinfer {
namespace {

TEST(NcclLoad, MissingAndForeignLibrariesAreListedInTheError) {
  auto r = loadNcclLibrary({"/nonexistent/libnccl.so.2", "libm.so.6"});
  ASSERT_FALSE(r.ok());
  const std::string& m = r.error().message;
  EXPECT_NE(m.find("NCCL could not be loaded (set DEEPINFER_NCCL_LIBRARY"), std::string::npos) << m;
  EXPECT_NE(m.find("/nonexistent/libnccl.so.2: "), std::string::npos) << m;
  EXPECT_NE(m.find("libm.so.6: no ncclGetVersion"), std::string::npos) << m;
  auto none = loadNcclLibrary({});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("tried: nothing"), std::string::npos) << none.error().message;
}

TEST(NcclLoad, TheEnvironmentVariableIsTheFirstCandidate) {
  ::setenv("DEEPINFER_NCCL_LIBRARY", "/opt/custom/libnccl.so.2", 1);
  const std::vector<std::string> c = defaultNcclCandidates();
  ::unsetenv("DEEPINFER_NCCL_LIBRARY");
  ASSERT_GE(c.size(), 2u);
  EXPECT_EQ(c[0], "/opt/custom/libnccl.so.2");
  EXPECT_EQ(c[1], "libnccl.so.2");
}

TEST(NcclLoad, AGroupNeedsDevices) {
  auto g = NcclGroup::create({});
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.error().message, "an NCCL group needs at least one device");
  auto null = NcclGroup::create({nullptr});
  ASSERT_FALSE(null.ok());
  EXPECT_EQ(null.error().message, "NCCL group: device 0 is null");
}

}  // namespace
}  // namespace deepinfer
