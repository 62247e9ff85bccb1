// Launch contract shared by `kernels.cu` and the Rust crate.
//
// `lib.rs` has a unit test that reads this file and checks that the Rust
// constants `BLOCK`, `SCAN_ITEMS` and `SCAN_TILE` equal the numbers below, so
// change both together.
//
// This header includes nothing: it must compile under NVRTC (which has no
// system headers) as well as under nvcc.
#pragma once

// Threads per block for the kernels that use shared memory (`sum_*`,
// `scan_*`). The element-wise kernels accept any block size.
#define GK_BLOCK 256

// Elements each thread of `scan_block_*` scans sequentially.
#define GK_SCAN_ITEMS 4

// Elements per scan tile: one block scans one tile at a time.
#define GK_SCAN_TILE 1024

// Reductions (`reduce.cu`): the input is cut into at most
// `GK_REDUCE_PARTS` parts, one more per `GK_REDUCE_TILE` elements; each part
// gets one block and one partial result. A reduction of at most
// `GK_REDUCE_PARTS` elements (the partials) is therefore one part.
#define GK_REDUCE_TILE 2048
#define GK_REDUCE_PARTS 1024

static_assert(GK_SCAN_TILE == GK_BLOCK * GK_SCAN_ITEMS, "tile = block * items");
static_assert(GK_REDUCE_PARTS <= GK_REDUCE_TILE, "the partials are one part");
static_assert(GK_BLOCK % 32 == 0 && GK_BLOCK <= 1024, "block = whole warps");

typedef unsigned long long u64;
