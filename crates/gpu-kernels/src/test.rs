//! Tests: the launch contract's numbers agree with the PTX and the CUDA
//! headers, every built-in is in its module, and the grids cover every size.

use crate::{
    grid_for, ops, reduce, reduce_chunk, reduce_parts, scan_tiles, BLOCK, KERNELS_PTX, MAX_GRID,
    REDUCE_PARTS, REDUCE_PTX, REDUCE_TILE, SCAN_ITEMS, SCAN_TILE,
};

const HEADER: &str = include_str!("cuda/kernels.cuh");
const COMMITTED_PTX: &str = include_str!("../ptx/kernels.ptx");
const COMMITTED_REDUCE_PTX: &str = include_str!("../ptx/reduce.ptx");
const COMMITTED_DIAG_PTX: &str = include_str!("../ptx/diag.ptx");

/// The names of the `.entry` directives of a PTX text.
fn entries(ptx: &str) -> Vec<&str> {
    ptx.lines()
        .filter_map(|line| line.trim().strip_prefix(".visible .entry "))
        .map(|rest| rest.split('(').next().unwrap_or(rest).trim())
        .collect()
}

/// The value of `#define NAME value` in `kernels.cuh`.
fn define(name: &str) -> u32 {
    HEADER
        .lines()
        .find_map(|line| {
            let mut words = line.split_whitespace();
            (words.next() == Some("#define") && words.next() == Some(name))
                .then(|| words.next())
                .flatten()
        })
        .unwrap_or_else(|| panic!("#define {name} not found in kernels.cuh"))
        .parse()
        .unwrap_or_else(|e| panic!("#define {name}: {e}"))
}

/// The first line of a PTX text that starts with `directive`, without it.
fn directive<'a>(ptx: &'a str, directive: &str) -> &'a str {
    ptx.lines()
        .find_map(|line| line.strip_prefix(directive))
        .unwrap_or_else(|| panic!("no {directive} line"))
        .trim()
}

#[test]
fn ptx_has_an_entry_for_every_name() {
    for (ptx, all) in [
        (KERNELS_PTX, ops::NAMES),
        (COMMITTED_PTX, ops::NAMES),
        (REDUCE_PTX, reduce::NAMES),
        (COMMITTED_REDUCE_PTX, reduce::NAMES),
        (crate::DIAG_PTX, crate::diag::NAMES),
        (COMMITTED_DIAG_PTX, crate::diag::NAMES),
    ] {
        let found = entries(ptx);
        for name in all {
            assert!(found.contains(name), "no .entry {name} in the PTX");
        }
        assert_eq!(found.len(), all.len(), "entries not in the list: {found:?}");
    }
}

/// Every static resolves in its module (its entry found by name, the
/// module loaded and checked against the PTX), and no name is in both
/// modules.
#[test]
fn every_kernel_resolves_in_its_module() {
    let rt = gpu_sched::Runtime::host().unwrap();
    assert_eq!(rt.cu_function(&crate::FILL_F32).unwrap(), 0);
    assert_eq!(rt.cu_function(&crate::SPIN_NS).unwrap(), 0);
    assert_eq!(rt.cu_function(&crate::SPIN_TOUCH_F32).unwrap(), 0);
    assert_eq!(rt.cu_function(&ops::GATE).unwrap(), 0);
    assert_eq!(rt.cu_function(&crate::SCAN_ADD_F64).unwrap(), 0);
    assert_eq!(rt.cu_function(&reduce::REDUCE_SUM_F32).unwrap(), 0);
    assert_eq!(rt.cu_function(&reduce::REDUCE_DOT_F32_F64).unwrap(), 0);
    assert_eq!(crate::SCAN_BLOCK_F32.name(), "scan_block_f32");
    assert_eq!(<f64 as crate::Float>::scale().name(), "scale_f64");
    assert_eq!(<f32 as crate::Float>::reduce_dot().name(), "reduce_dot_f32");
    assert_eq!(rt.cu_function(&crate::diag::ADD_DIAGONAL_F64).unwrap(), 0);
    for name in reduce::NAMES.iter().chain(crate::diag::NAMES) {
        assert!(!ops::NAMES.contains(name), "{name} in two modules");
    }
    for name in crate::diag::NAMES {
        assert!(!reduce::NAMES.contains(name), "{name} in two modules");
    }
}

#[test]
fn reduce_partition_covers_n_in_whole_blocks() {
    let tile = u64::from(REDUCE_TILE);
    let block = u64::from(BLOCK);
    for n in [
        0,
        1,
        31,
        block,
        tile - 1,
        tile,
        tile + 1,
        1000 * tile + 5,
        (1 << 20) + 3,
        u64::from(REDUCE_PARTS) * tile,
        u64::from(REDUCE_PARTS) * tile + 1,
        1 << 40,
    ] {
        let (parts, chunk) = (reduce_parts(n), reduce_chunk(n));
        assert!((1..=u64::from(REDUCE_PARTS)).contains(&parts), "n = {n}");
        assert_eq!(chunk % block, 0, "n = {n}");
        assert!(parts * chunk >= n, "n = {n}: the parts cover n");
        assert!(chunk < n.div_ceil(parts) + block, "n = {n}: chunk {chunk}");
        // The partials are one part.
        assert_eq!(reduce_parts(parts), 1);
        assert!(reduce_chunk(parts) >= parts);
    }
}

#[test]
fn names_are_unique() {
    for names in [ops::NAMES, reduce::NAMES, crate::diag::NAMES] {
        let mut all = names.to_vec();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), names.len());
    }
}

#[test]
fn committed_ptx_targets_old_drivers() {
    // PTX ISA 8.0 (CUDA 12.0, driver >= 525) for sm_70: see README.md.
    for ptx in [COMMITTED_PTX, COMMITTED_REDUCE_PTX, COMMITTED_DIAG_PTX] {
        assert_eq!(directive(ptx, ".version"), "8.0");
        assert_eq!(directive(ptx, ".target"), "sm_70");
        assert_eq!(directive(ptx, ".address_size"), "64");
    }
}

#[test]
fn constants_match_the_cuda_header() {
    assert_eq!(define("GK_BLOCK"), BLOCK);
    assert_eq!(define("GK_SCAN_ITEMS"), SCAN_ITEMS);
    assert_eq!(define("GK_SCAN_TILE"), SCAN_TILE);
    assert_eq!(define("GK_REDUCE_TILE"), REDUCE_TILE);
    assert_eq!(define("GK_REDUCE_PARTS"), REDUCE_PARTS);
    assert_eq!(BLOCK % 32, 0);
}

#[test]
fn scan_tiles_rounds_up() {
    let tile = u64::from(SCAN_TILE);
    assert_eq!(scan_tiles(0), 0);
    assert_eq!(scan_tiles(1), 1);
    assert_eq!(scan_tiles(tile - 1), 1);
    assert_eq!(scan_tiles(tile), 1);
    assert_eq!(scan_tiles(tile + 1), 2);
    assert_eq!(scan_tiles(u64::MAX), u64::MAX / tile + 1);
}

#[test]
fn grid_for_covers_and_caps() {
    let block = u64::from(BLOCK);
    assert_eq!(grid_for(0), 1);
    assert_eq!(grid_for(1), 1);
    assert_eq!(grid_for(block), 1);
    assert_eq!(grid_for(block + 1), 2);
    assert_eq!(grid_for(block * u64::from(MAX_GRID)), MAX_GRID);
    assert_eq!(grid_for(block * u64::from(MAX_GRID) + 1), MAX_GRID);
}
