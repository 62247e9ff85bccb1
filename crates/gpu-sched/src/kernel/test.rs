//! Unit tests of launch configurations.

use super::*;

#[test]
fn a_block_of_zero_is_a_refused_configuration_not_a_panic() {
    let cfg = LaunchConfig::for_elements(100, 0);
    assert_eq!(cfg.block, [0, 1, 1]);
    assert_eq!(cfg.grid, [100, 1, 1]);
    let e = cfg.check().unwrap_err();
    assert!(e.contains("at least 1"), "{e}");
    assert!(LaunchConfig::for_grid_2d(10, 10, 0, 4).check().is_err());
}

#[test]
fn huge_blocks_are_refused_not_overflowed() {
    let cfg = LaunchConfig {
        grid: [1, 1, 1],
        block: [u32::MAX; 3],
        shared_mem_bytes: 0,
    };
    let e = cfg.check().unwrap_err();
    assert!(e.contains("at most 1024"), "{e}");
}
