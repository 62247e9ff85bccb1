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

static_assert(GK_SCAN_TILE == GK_BLOCK * GK_SCAN_ITEMS, "tile = block * items");
static_assert(GK_BLOCK % 32 == 0 && GK_BLOCK <= 1024, "block = whole warps");

typedef unsigned long long u64;
