// The stream-K walk order of the wgmma kernel (kernels/cuda/stream_k_walk.h): every block's stages exactly once, split
// tiles' segments whole, and with head first no block ends inside a tile unless its share lies in one tile.
#include "kernels/cuda/stream_k_walk.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <vector>

namespace qlm::cuda {
namespace {

// Grids like the kernel's: T = tiles x per_tile stages over G blocks, block b owning [b T / G, (b + 1) T / G).
struct Grid {
  int64_t tiles, per_tile, blocks;
};

TEST(StreamKWalk, EveryStageOnceAndSegmentsWhole) {
  const Grid grids[] = {{320, 64, 132}, {256, 64, 128}, {320, 64, 128}, {86, 64, 132}, {7, 5, 3},
                        {1, 9, 4},      {13, 1, 5},     {5, 7, 1},      {432, 64, 132}};
  for (const Grid& g : grids)
    for (bool head_first : {false, true}) {
      const int64_t T = g.tiles * g.per_tile;
      std::vector<int> seen(static_cast<size_t>(T), 0);
      for (int64_t b = 0; b < g.blocks; ++b) {
        const int64_t q_begin = b * T / g.blocks, q_end = (b + 1) * T / g.blocks;
        const int64_t first = stream_k_walk_first(q_begin, q_end, g.per_tile, head_first);
        ASSERT_GE(first, q_begin);
        ASSERT_LE(first, q_end);
        int64_t prev = -1;
        std::set<int64_t> tiles;
        for (int64_t i = 0; i < q_end - q_begin; ++i) {
          const int64_t q = stream_k_walk_stage(q_begin, q_end, first, i);
          ASSERT_GE(q, q_begin);
          ASSERT_LT(q, q_end);
          ++seen[static_cast<size_t>(q)];
          // Inside a tile the walk goes up one stage at a time: a segment is never cut by the wrap.
          if (prev >= 0 && q / g.per_tile == prev / g.per_tile) {
            EXPECT_EQ(q, prev + 1);
          }
          // A tile left is never come back to: each segment is walked in one piece.
          if (prev < 0 || q / g.per_tile != prev / g.per_tile) {
            EXPECT_TRUE(tiles.insert(q / g.per_tile).second);
          }
          prev = q;
        }
        if (!head_first) {
          EXPECT_EQ(first, q_begin);
        }
        // Head first: the last stage walked ends a tile, unless the whole share lies inside one tile.
        const int64_t last = stream_k_walk_stage(q_begin, q_end, first, q_end - q_begin - 1);
        const bool one_tile = q_begin / g.per_tile == (q_end - 1) / g.per_tile;
        if (head_first && q_end > q_begin && !one_tile && q_end % g.per_tile != 0) {
          EXPECT_EQ((last + 1) % g.per_tile, 0) << "block " << b << " of " << g.blocks << " ends inside a tile";
        }
      }
      for (int64_t q = 0; q < T; ++q) ASSERT_EQ(seen[static_cast<size_t>(q)], 1) << "stage " << q;
    }
}

TEST(StreamKWalk, HeadFirstOnSeventyBQkv) {
  // 70b.qkv at 1024 tokens on the 256 x 128 tile: 320 tiles of 64 stages on 132 blocks. Block 0 owns tiles 0 and 1
  // and the head (27 stages) of tile 2: it walks that head first.
  const int64_t T = 320 * 64, q_end = T / 132;
  EXPECT_EQ(q_end, 155);
  EXPECT_EQ(stream_k_walk_first(0, q_end, 64, true), 128);
  EXPECT_EQ(stream_k_walk_stage(0, q_end, 128, 0), 128);
  EXPECT_EQ(stream_k_walk_stage(0, q_end, 128, 26), 154);
  EXPECT_EQ(stream_k_walk_stage(0, q_end, 128, 27), 0);
  // A share that ends on a tile boundary, or inside the tile it starts in, is walked in order.
  EXPECT_EQ(stream_k_walk_first(64, 192, 64, true), 64);
  EXPECT_EQ(stream_k_walk_first(70, 100, 64, true), 70);
  EXPECT_EQ(stream_k_walk_first(0, q_end, 64, false), 0);
}

}  // namespace
}  // namespace qlm::cuda
