//! The tiled Cholesky of [`crate::cholesky`] over every device of a
//! runtime's group (issue 27, B18): tiles placed 2D block-cyclic over a
//! `p x q` grid of devices, each tile operation a task on its tile's
//! device, and the tiles an operation reads from another device brought
//! over by tracked peer copies (`TaskContext::copy_peer`) into buffers of
//! the reading device. Nothing is ordered by hand: the ledger orders each
//! copy after the operation that wrote its source and before the ones that
//! read it, across devices, and orders the reuse of a copy's buffer after
//! its readers, so the DAG is the same as on one device.
//!
//! Each step `k`'s column (the factored diagonal tile, then the solved
//! tiles below it) goes once to each device that reads it, into one of
//! two alternating sets of buffers (step `k` into set `k % 2`), so a
//! step's copies need not wait for the previous step's readers.

use crate::cholesky::{split, test_tiles, Tiles};
use gpu::blas::{Gemm, Op, Side, Syrk, Trsm};
use gpu::solver::Potrf;
use gpu::{Buffer, Result, Runtime, TaskContext};

/// The devices as a `p x q` grid, `p >= q`, `p * q = devices`: as square
/// as the count allows (1 x 1, 2 x 1, 3 x 1, 2 x 2, ..., 4 x 2).
pub fn grid(devices: usize) -> (usize, usize) {
    let devices = devices.max(1);
    let q = (1..=devices)
        .filter(|q| devices % q == 0 && q * q <= devices)
        .max()
        .unwrap_or(1);
    (devices / q, q)
}

/// The device of tile `(i, j)` on a `p x q` grid: 2D block-cyclic.
pub fn owner((p, q): (usize, usize), i: usize, j: usize) -> usize {
    i % p + p * (j % q)
}

/// The lower tiles of an `n x n` symmetric matrix, `n = t * b`, each on
/// its [`owner`]'s device: tile `(i, j)` for `i >= j` at [`Tiles::at`].
#[derive(Debug)]
pub struct DeviceTiles {
    /// Tiles per side.
    pub t: usize,
    /// Tile order.
    pub b: usize,
    /// The device grid.
    pub grid: (usize, usize),
    /// The lower tiles, by [`Tiles::at`], each of its owner's device.
    pub tiles: Vec<Buffer<f64>>,
}

impl DeviceTiles {
    /// [`Tiles::test_matrix`]'s matrix, each tile made on its owner's
    /// device by `setup[device]` (a task of that device).
    pub fn test_matrix(setup: &[TaskContext], t: usize, b: usize) -> Result<DeviceTiles> {
        let grid = grid(setup.len());
        let tiles = test_tiles(t, b, |i, j, host| setup[owner(grid, i, j)].from_host(host))?;
        Ok(DeviceTiles { t, b, grid, tiles })
    }

    /// The factor as one device's tiles, copied by `task` (of that device):
    /// for [`crate::cholesky::dense_factor`].
    pub fn gather(&self, task: &TaskContext) -> Result<Tiles> {
        Tiles::copied(self.t, self.b, &self.tiles, task, |s, d| {
            task.copy_peer(s, d)
        })
    }
}

/// Per device, the copies of one step's column it reads: slot `x` (a tile
/// row, `x >= k`) holds `L(x, k)` (`L(k, k)` at `x = k`).
struct Column {
    bufs: Vec<Option<Buffer<f64>>>,
}

/// Two alternating [`Column`]s a device (step `k` uses `k % 2`).
type Columns = [Column; 2];

/// Factors `a` in place over the devices (`A = L L^T`, `L` in the lower
/// tiles), submitting every operation in program order: tile `(i, j)`'s on
/// `tasks[owner][(i + 2 j) % tasks[owner].len()]` (the tasks of each
/// device, one stream each), and the peer copies on the reading device's
/// first task. Returns once everything is queued; a matrix that is not
/// positive definite is `Error::NotPositiveDefinite` at the next wait of
/// the potrf's task.
///
/// # Panics
///
/// If `tasks` does not have a non-empty set of tasks for each device of
/// `a`'s grid.
pub fn factor_devices(tasks: &[Vec<TaskContext>], a: &mut DeviceTiles) -> Result<()> {
    let (t, b, grid) = (a.t, a.b, a.grid);
    let devices = grid.0 * grid.1;
    assert!(
        tasks.len() >= devices && tasks.iter().take(devices).all(|d| !d.is_empty()),
        "tasks for each of the {devices} devices"
    );
    let on = |i: usize, j: usize| {
        let d = &tasks[owner(grid, i, j)];
        &d[(i + 2 * j) % d.len()]
    };
    // Each device's two column buffers, made when first needed.
    let mut cols: Vec<Columns> = (0..devices)
        .map(|_| {
            [
                Column {
                    bufs: (0..t).map(|_| None).collect(),
                },
                Column {
                    bufs: (0..t).map(|_| None).collect(),
                },
            ]
        })
        .collect();
    for k in 0..t {
        // The panel: factor the diagonal tile.
        Potrf::new(b).run(on(k, k), &mut a.tiles[Tiles::at(k, k)])?;
        // Its copy on each other device that solves a tile of column k.
        let dk = owner(grid, k, k);
        bring(tasks, &mut cols, a, k, k, |d| {
            (k + 1..t).any(|i| owner(grid, i, k) == d)
        })?;
        // The column: A(i,k) = A(i,k) L(k,k)^-T, on the tile's device.
        for i in k + 1..t {
            let d = owner(grid, i, k);
            let (aik, tile) = split(&mut a.tiles, Tiles::at(i, k));
            let lkk = if d == dk {
                tile(Tiles::at(k, k))
            } else {
                cols[d][k % 2].bufs[k].as_ref().expect("brought above")
            };
            Trsm::new(b, b)
                .side(Side::Right)
                .op(Op::T)
                .run(on(i, k), lkk, aik)?;
        }
        // Each solved tile L(x,k) to each other device that updates a tile
        // of row x or column x of the trailing matrix.
        for x in k + 1..t {
            bring(tasks, &mut cols, a, x, k, |d| {
                (k + 1..t).any(|j| (j..t).any(|i| owner(grid, i, j) == d && (i == x || j == x)))
            })?;
        }
        // The trailing update: A(i,j) -= L(i,k) L(j,k)^T, on the tile's
        // device, with the column's tiles there (its own or the copies).
        for j in k + 1..t {
            for i in j..t {
                let d = owner(grid, i, j);
                let (aij, tile) = split(&mut a.tiles, Tiles::at(i, j));
                let col = &cols[d][k % 2];
                let l = |x: usize| {
                    if owner(grid, x, k) == d {
                        tile(Tiles::at(x, k))
                    } else {
                        col.bufs[x].as_ref().expect("brought above")
                    }
                };
                if i == j {
                    Syrk::new(b, b)
                        .alpha(-1.0)
                        .beta(1.0)
                        .run(on(j, j), l(j), aij)?;
                } else {
                    Gemm::new(b, b, b).op_b(Op::T).alpha(-1.0).beta(1.0).run(
                        on(i, j),
                        l(i),
                        l(j),
                        aij,
                    )?;
                }
            }
        }
    }
    Ok(())
}

/// Copies tile `(x, k)` of `a` from its device to each other device `d`
/// with `needs(d)`, on `d`'s first task, into slot `x` of `d`'s column
/// `k % 2` (a buffer made at its first use).
fn bring(
    tasks: &[Vec<TaskContext>],
    cols: &mut [Columns],
    a: &DeviceTiles,
    x: usize,
    k: usize,
    needs: impl Fn(usize) -> bool,
) -> Result<()> {
    let from = owner(a.grid, x, k);
    let src = &a.tiles[Tiles::at(x, k)];
    for d in (0..cols.len()).filter(|&d| d != from && needs(d)) {
        let task = &tasks[d][0];
        let slot = &mut cols[d][k % 2].bufs[x];
        if slot.is_none() {
            *slot = Some(task.alloc::<f64>(a.b * a.b)?);
        }
        task.copy_peer(src, slot.as_mut().expect("made above"))?;
    }
    Ok(())
}

/// `per_device` tasks on each device of `rt`'s group (one stream each).
pub fn device_tasks(rt: &Runtime, per_device: usize) -> Result<Vec<Vec<TaskContext>>> {
    (0..rt.device_count())
        .map(|d| {
            let dev = rt.device(d)?;
            (0..per_device.max(1)).map(|_| dev.begin_task()).collect()
        })
        .collect()
}
