//! The tiled Cholesky over several devices (issue 27, item 2) on the host
//! backend's simulated devices: 2D block-cyclic tiles, tracked peer copies,
//! the DAG found by the ledger. Its factor equals the one-device factor's
//! bit for bit (the same operations on the same values, in the same order
//! per tile), `A = L L^T` to rounding, and the race detector reports
//! nothing.

use common::cholesky::{dense_factor, entry, factor, tasks, Tiles};
use common::cholesky_devices::{device_tasks, factor_devices, grid, owner, DeviceTiles};
use gpu::{BackendChoice, Runtime, RuntimeOptions};

fn host_devices(n: usize) -> Runtime {
    let rt = Runtime::new(RuntimeOptions {
        backend: BackendChoice::Host,
        host_devices: n,
        ..RuntimeOptions::default()
    })
    .unwrap();
    assert_eq!(rt.device_count(), n);
    rt
}

#[test]
fn the_grid_is_as_square_as_the_count_allows() {
    assert_eq!(grid(1), (1, 1));
    assert_eq!(grid(2), (2, 1));
    assert_eq!(grid(3), (3, 1));
    assert_eq!(grid(4), (2, 2));
    assert_eq!(grid(8), (4, 2));
    // Every device owns tiles of a 4 x 4 grid of tiles.
    for d in [2, 4, 8] {
        let g = grid(d);
        let mut owned = vec![false; d];
        for i in 0..8 {
            for j in 0..=i {
                owned[owner(g, i, j)] = true;
            }
        }
        assert!(owned.iter().all(|&o| o), "{d} devices");
    }
}

/// On 2, 3, 4 and 8 simulated devices, two tasks each.
#[test]
fn the_factor_over_devices_is_the_one_device_factor() {
    let (t, b) = (7, 8);
    let n = t * b;
    // The one-device factor, the reference.
    let one = host_devices(1);
    let setup = one.begin_task().unwrap();
    let mut a1 = Tiles::test_matrix(&setup, t, b).unwrap();
    setup.synchronize().unwrap();
    let w = tasks(&one, 3).unwrap();
    for x in &w {
        x.after_fence(setup.fence().unwrap()).unwrap();
    }
    factor(&w, &mut a1).unwrap();
    for x in &w {
        x.synchronize().unwrap();
    }
    let want = dense_factor(&setup, &a1).unwrap();
    // L L^T against A.
    let mut err = 0.0f64;
    let mut norm = 0.0f64;
    for i in 0..n {
        for j in 0..=i {
            let s: f64 = (0..=j).map(|c| want[i + c * n] * want[j + c * n]).sum();
            err += (s - entry(n, i, j)).powi(2);
            norm += entry(n, i, j).powi(2);
        }
    }
    assert!((err / norm).sqrt() < 1e-13, "the reference factor");
    for devices in [2, 3, 4, 8] {
        let rt = host_devices(devices);
        let setup = device_tasks(&rt, 1).unwrap();
        let setup: Vec<_> = setup.into_iter().map(|mut v| v.remove(0)).collect();
        let mut a = DeviceTiles::test_matrix(&setup, t, b).unwrap();
        for s in &setup {
            s.synchronize().unwrap();
        }
        let work = device_tasks(&rt, 2).unwrap();
        factor_devices(&work, &mut a).unwrap();
        for d in &work {
            for x in d {
                x.synchronize().unwrap();
            }
        }
        let home = rt.begin_task().unwrap();
        let got = dense_factor(&home, &a.gather(&home).unwrap()).unwrap();
        assert!(got == want, "{devices} devices: the factor differs");
        assert!(rt.races().is_empty(), "{devices} devices: {:?}", rt.races());
    }
}
