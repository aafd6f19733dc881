// The wgmma kernel's exchange of fast-layout code words into the MMA's k order (kernels/cuda/wna16_k_order.h,
// natural_k_word) on the CPU: a warp's words of every column block, k-tile and 16-column tile of a packed layer, the
// quad exchange emulated, and every nibble of the result checked against the layout's own reader
// (wna16_fast_code) at the row and column the MMA's A fragment wants there. The GPU tests can only see the product.
#include "kernels/cuda/wna16_k_order.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>

#include "kernels/cuda/wna16_fast_layout.h"
#include "tests/kernels/wna16_random.h"

namespace qlm::cuda {
namespace {

// __byte_perm(x, y, s): byte i of the result is byte (s >> 4i) & 7 of the eight bytes y:x.
uint32_t byte_perm(uint32_t x, uint32_t y, uint32_t s) {
  const uint64_t bytes = (static_cast<uint64_t>(y) << 32) | x;
  uint32_t out = 0;
  for (int i = 0; i < 4; ++i) out |= static_cast<uint32_t>((bytes >> (8 * ((s >> (4 * i)) & 7u))) & 0xFFu) << (8 * i);
  return out;
}

// Nibble p of a word (dequant_tile: A register p % 4 from nibbles p % 4 and p % 4 + 4) as (row in the k-tile,
// column in the 16-column tile) for lane's fragment, given the rows of its four k slots 2t, 2t + 1, 2t + 8, 2t + 9.
struct Place {
  int row, col;
};
Place place(int lane, int nibble, const std::array<int, 4>& slot_rows) {
  const int g = lane >> 2, reg = nibble % 4, high = nibble / 4;
  const int col = g + (reg & 1) * 8;                 // A registers 1 and 3: fragment row g + 8
  const int row = slot_rows[(reg >> 1) * 2 + high];  // registers 0, 1: slots 2t, 2t + 1; 2, 3: 2t + 8, 2t + 9
  return {row, col};
}

TEST(Wna16KOrder, ExchangedWordsHoldTheMmasRows) {
  for (const bool act_order : {false, true}) {
    const testing::Wna16Spec spec{.bits = 4, .K = 96, .N = 200, .group_size = 32, .act_order = act_order, .seed = 7};
    const Wna16FastLayout L = pack_wna16_fast(testing::random_wna16(spec).weights, true);
    ASSERT_EQ(L.bits, 4);
    for (int64_t nb = 0; nb < L.n_blocks; ++nb)
      for (int64_t kt = 0; kt < L.k_tiles; ++kt)
        for (int tile = 0; tile < 4; ++tile) {
          // Word `tile` of each lane's 16 bytes of this column block and k-tile (the kernels' shared-memory copy of a
          // stage keeps the block's words in this order).
          std::array<uint32_t, 32> words{};
          for (int lane = 0; lane < 32; ++lane)
            words[lane] = L.codes[static_cast<size_t>(((nb * L.k_tiles + kt) * 32 + lane) * 4 + tile)];
          for (int lane = 0; lane < 32; ++lane) {
            const int t = lane & 3;
            const uint32_t exchanged = byte_perm(words[natural_k_source_lane(lane, 0)],
                                                 words[natural_k_source_lane(lane, 1)], natural_k_byte_selector(lane));
            for (int nibble = 0; nibble < 8; ++nibble) {
              // As stored: rows 4t..4t+3 in the slots (what x permuted into the words' order pairs them with).
              const Place stored = place(lane, nibble, {4 * t, 4 * t + 1, 4 * t + 2, 4 * t + 3});
              // Exchanged: the MMA's own rows for x in its natural k order.
              const Place natural = place(lane, nibble, {2 * t, 2 * t + 1, 2 * t + 8, 2 * t + 9});
              const int64_t n0 = nb * Wna16FastLayout::kBlockN + tile * 16, j0 = kt * Wna16FastLayout::kTileK;
              SCOPED_TRACE(::testing::Message() << "act_order " << act_order << " block " << nb << " k-tile " << kt
                                                << " tile " << tile << " lane " << lane << " nibble " << nibble);
              ASSERT_EQ((words[lane] >> (4 * nibble)) & 0xFu, wna16_fast_code(L, j0 + stored.row, n0 + stored.col));
              ASSERT_EQ((exchanged >> (4 * nibble)) & 0xFu, wna16_fast_code(L, j0 + natural.row, n0 + natural.col));
            }
          }
        }
  }
}

// The source lanes stay inside the lane's quad, and each quad's four lanes read each word of the quad exactly twice
// (once per half): the exchange is a permutation of the quad's 16 bytes.
TEST(Wna16KOrder, SourcesArePartnersInTheQuad) {
  for (int lane = 0; lane < 32; ++lane)
    for (int half = 0; half < 2; ++half) EXPECT_EQ(natural_k_source_lane(lane, half) & ~3, lane & ~3);
  std::array<int, 4> reads{};
  for (int t = 0; t < 4; ++t)
    for (int half = 0; half < 2; ++half) ++reads[natural_k_source_lane(t, half)];
  for (int r : reads) EXPECT_EQ(r, 2);
}

}  // namespace
}  // namespace qlm::cuda
