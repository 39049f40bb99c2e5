// The KV page pool: sequences grow a page at a time, a request the pool cannot meet changes
// nothing, and released pages are reused.

#include "model/kv_pages.h"

#include <gtest/gtest.h>

#include <set>

namespace evt::model {
namespace {

TEST(KvPages, GrowsByWholePagesAndRefusesWithoutSideEffects) {
  KvPages pool(4);
  std::vector<int32_t> a, b;
  ASSERT_TRUE(pool.reserve(a, 17, 16).ok());  // 17 positions: 2 pages
  EXPECT_EQ(a.size(), 2u);
  ASSERT_TRUE(pool.reserve(a, 32, 16).ok());  // still 2
  EXPECT_EQ(a.size(), 2u);
  ASSERT_TRUE(pool.reserve(b, 16, 16).ok());
  EXPECT_EQ(pool.used(), 3);
  const Status full = pool.reserve(b, 48, 16);  // needs 2 more, 1 free
  ASSERT_FALSE(full.ok());
  EXPECT_NE(full.message().find("the KV cache is full: 2 more pages needed, 1 of 4 free"), std::string::npos)
      << full.message();
  EXPECT_EQ(b.size(), 1u);
  EXPECT_EQ(pool.used(), 3);
  std::set<int32_t> distinct(a.begin(), a.end());
  distinct.insert(b.begin(), b.end());
  EXPECT_EQ(distinct.size(), 3u);
}

TEST(KvPages, ReleasedPagesAreReused) {
  KvPages pool(2);
  std::vector<int32_t> a, b;
  ASSERT_TRUE(pool.reserve(a, 32, 16).ok());
  EXPECT_FALSE(pool.reserve(b, 1, 16).ok());
  pool.release(a);
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(pool.used(), 0);
  ASSERT_TRUE(pool.reserve(b, 32, 16).ok());
  EXPECT_EQ(pool.used(), 2);
}

}  // namespace
}  // namespace evt::model
