// DataLoader sharding by rank (distributed training): the ranks' batches of step i, concatenated in rank
// order, are exactly batch i of one loader with the global batch size and the same seed.
#include <gtest/gtest.h>

#include <memory>

#include "meganeura/core/error.hpp"
#include "meganeura/data/dataset.hpp"
#include "meganeura/data/loader.hpp"

namespace meganeura::test {
namespace {

std::shared_ptr<TensorDataset> rows(int n) {
  auto ds = std::make_shared<TensorDataset>();
  std::vector<float> v;
  for (int i = 0; i < n; ++i) v.push_back(float(i));  // a row's value is its index
  ds->add_f32("x", {1}, v);
  return ds;
}

TEST(LoaderShard, RanksTogetherMakeTheGlobalBatch) {
  const auto ds = rows(103);  // 103 = 4 global batches of 24 + 7 dropped rows
  for (int world : {2, 3}) {
    LoaderOptions g{.batch_size = 8 * world, .shuffle = true, .seed = 5, .prefetch = 0};
    DataLoader global(ds, g);
    std::vector<std::unique_ptr<DataLoader>> ranks;
    for (int r = 0; r < world; ++r)
      ranks.push_back(std::make_unique<DataLoader>(ds, LoaderOptions{.batch_size = 8,
                                                                     .shuffle = true,
                                                                     .seed = 5,
                                                                     .prefetch = r % 2 ? 2 : 0,
                                                                     .rank = r,
                                                                     .world = world}));
    for (uint64_t epoch : {0u, 1u}) {
      global.start_epoch(epoch);
      for (auto& l : ranks) l->start_epoch(epoch);
      EXPECT_EQ(ranks[0]->batches_per_epoch(), 103 / (8 * world));
      int batches = 0;
      while (auto want = global.next()) {
        std::vector<float> got;
        for (auto& l : ranks) {
          auto b = l->next();
          ASSERT_TRUE(b.has_value()) << "world " << world << " batch " << batches;
          EXPECT_EQ(b->rows, 8);
          got.insert(got.end(), b->at("x").f32.begin(), b->at("x").f32.end());
        }
        EXPECT_EQ(got, want->at("x").f32) << "world " << world << " epoch " << epoch << " batch " << batches;
        ++batches;
      }
      EXPECT_EQ(batches, 103 / (8 * world));
      for (auto& l : ranks) EXPECT_FALSE(l->next().has_value());
    }
  }
}

TEST(LoaderShard, RejectsBadRankAndPartialBatches) {
  const auto ds = rows(10);
  EXPECT_THROW(DataLoader(ds, LoaderOptions{.batch_size = 2, .rank = 2, .world = 2}), DataError);
  EXPECT_THROW(DataLoader(ds, LoaderOptions{.batch_size = 2, .rank = -1, .world = 2}), DataError);
  EXPECT_THROW(DataLoader(ds, LoaderOptions{.batch_size = 2, .drop_last = false, .rank = 0, .world = 2}),
               DataError);
  EXPECT_THROW(DataLoader(ds, LoaderOptions{.batch_size = 4, .rank = 0, .world = 3}),
               DataError);  // 10 < 12 rows
}

}  // namespace
}  // namespace meganeura::test
