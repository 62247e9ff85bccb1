//! Unit tests of `par_copy`.

use super::par_copy;

/// Every length and alignment: the streamed middle, the copied ends,
/// the pieces of the pool's path (past 4 MiB), the plain small copy.
#[test]
fn par_copy_copies_every_byte() {
    let n = (9 << 20) + 77;
    let src: Vec<u8> = (0..n).map(|i| (i * 131 + i / 977) as u8).collect();
    for (off, len) in [
        (0, n - 3),
        (1, n - 5),
        (13, (4 << 20) + 1),
        (3, 70),
        (5, 63),
        (0, 0),
    ] {
        let mut dst = vec![0u8; n];
        par_copy(&mut dst[off..off + len], &src[3..3 + len]);
        assert!(dst[off..off + len] == src[3..3 + len], "{off} {len}");
        assert!(dst[..off].iter().all(|&b| b == 0), "before {off} {len}");
        assert!(
            dst[off + len..].iter().all(|&b| b == 0),
            "after {off} {len}"
        );
    }
    let src: Vec<f64> = (0..(1 << 20) + 3).map(|i| i as f64 * 0.5).collect();
    let mut dst = vec![0.0; src.len()];
    par_copy(&mut dst, &src);
    assert_eq!(dst, src);
}
