//! # 05: a 2D heat step with a halo exchange
//!
//! The grid is split into two halves of rows, two "ranks" as in an MPI
//! code, each holding its rows and one halo row on either side. Each time
//! step, every rank
//!
//! 1. computes its boundary row (the one its neighbour needs) first, copies
//!    it to the host and "sends" it (here: hands the host copy over; an MPI
//!    code would pass it to `MPI_Send`),
//! 2. meanwhile computes its interior rows on another task, overlapping the
//!    exchange,
//! 3. "receives" the neighbour's boundary row into its halo row.
//!
//! All tasks of a step are ordered after the previous step by the scope
//! structure alone: the runtime inserts no device wait between steps. The
//! result is checked against a plain CPU loop over the whole grid.
//!
//! ## The stencil
//!
//! An explicit step of the heat equation with the 5-point Laplacian, the
//! grid's edge cells fixed:
//! `u'[i][j] = u + a (u[i-1][j] + u[i+1][j] + u[i][j-1] + u[i][j+1] - 4 u)`,
//! the kernel of `07-own-kernel` (`examples/common/heat.rs`: CUDA C compiled
//! at run time, with a host implementation). It computes any rows of the
//! next state from the whole current state, so each rank launches it on its
//! own buffer (its rows and halos) for one row of the next state: the row
//! is a view of the next state's buffer, and the tasks writing different
//! rows do not wait for each other.
//!
//! ```text
//! cargo run -p gpu-examples --example 05-stencil
//! ```

use common::heat;

use gpu::diag::Reason;
use gpu::{BackendKind, Buffer, Scope, TaskContext, ViewMut};
use heat::Heat;
use std::time::Instant;

/// The diffusion number `a` (stable up to 1/4).
const ALPHA: f32 = 0.2;
/// Largest difference allowed against the CPU loop.
const TOLERANCE: f32 = 1e-5;

/// The sizes of one run.
#[derive(Clone, Copy, Debug)]
struct Grid {
    /// Rows of the whole grid, its two fixed edge rows included (even).
    rows: usize,
    cols: usize,
    steps: usize,
}

impl Grid {
    /// Rows each rank computes: all but the two edge rows, halved.
    fn half(&self) -> usize {
        (self.rows - 2) / 2
    }

    /// Rows each rank holds: its own and a halo row on either side.
    fn local_rows(&self) -> usize {
        self.half() + 2
    }
}

/// One half of the grid, the current and the next state, each `half + 2`
/// rows of `cols`. Local row `l` is global row `id * half + l`: rank 0's
/// row 0 and rank 1's row `half + 1` are the grid's edges (fixed, the same
/// in both states); rank 0's row `half + 1` and rank 1's row 0 are halos
/// (copies of the other rank's boundary row).
struct Rank {
    u: Buffer<f32>,
    v: Buffer<f32>,
}

impl Rank {
    /// Uploads rank `id`'s rows of the starting field, halos included.
    fn upload(t: &TaskContext, g: Grid, id: usize, field: &[f32]) -> gpu::Result<Rank> {
        let first = id * g.half() * g.cols;
        let rows = &field[first..first + g.local_rows() * g.cols];
        Ok(Rank {
            u: t.from_host(rows)?,
            v: t.from_host(rows)?,
        })
    }
}

/// The rows of the next state one rank writes during a step, split by who
/// writes them, and the current state they are computed from (read by
/// several tasks).
struct Piece<'v, 'b> {
    old: &'v Buffer<f32>,
    /// The row the other rank needs, and its local index.
    boundary: (usize, &'v mut ViewMut<'b, f32>),
    /// The interior rows, and the local index of the first.
    interior: (usize, &'v mut [ViewMut<'b, f32>]),
    /// The halo row the other rank's boundary row goes into.
    halo: &'v mut ViewMut<'b, f32>,
}

impl<'v, 'b> Piece<'v, 'b> {
    fn new(
        rank: usize,
        half: usize,
        old: &'v Buffer<f32>,
        new: &'v mut [ViewMut<'b, f32>],
    ) -> Self {
        if rank == 0 {
            // 0: the grid's edge (fixed), 1..half: interior, half: boundary,
            // half + 1: halo from rank 1.
            let (head, tail) = new.split_at_mut(half);
            let [boundary, halo] = tail else {
                unreachable!("two rows after the interior")
            };
            Piece {
                old,
                boundary: (half, boundary),
                interior: (1, &mut head[1..]),
                halo,
            }
        } else {
            // 0: halo from rank 0, 1: boundary, 2..=half: interior,
            // half + 1: the grid's edge (fixed).
            let (head, tail) = new.split_at_mut(2);
            let [halo, boundary] = head else {
                unreachable!("two rows before the interior")
            };
            Piece {
                old,
                boundary: (1, boundary),
                interior: (2, &mut tail[..half - 1]),
                halo,
            }
        }
    }
}

/// Computes one rank's boundary row and copies it to the host: the message
/// to send. The copy synchronizes this task's stream only, not the stream
/// computing the interior.
fn compute_and_send(
    t: &TaskContext,
    heat: &Heat,
    g: Grid,
    old: &Buffer<f32>,
    (i, row): (usize, &mut ViewMut<'_, f32>),
) -> gpu::Result<Vec<f32>> {
    heat.step(t, row, old, (g.cols, g.local_rows()), i..i + 1, ALPHA)?;
    t.to_vec(&*row)
}

/// One time step of both ranks, as tasks of a nested scope of `s`.
fn step(s: &Scope<'_, '_>, heat: &Heat, g: Grid, ranks: &mut [Rank; 2]) -> gpu::Result<()> {
    let [r0, r1] = ranks;
    // The next states as row views, with what hands the rows back.
    let mut split0 = r0.v.split_chunks(g.cols)?;
    let mut split1 = r1.v.split_chunks(g.cols)?;
    let (mut new0, mut new1) = (split0.views(), split1.views());
    let p0 = Piece::new(0, g.half(), &r0.u, &mut new0);
    let p1 = Piece::new(1, g.half(), &r1.u, &mut new1);

    s.scope(|inner| {
        let [(old0, out0, halo0), (old1, out1, halo1)] = [p0, p1].map(|p| {
            // The interior of this rank: a task of its own (a launch a row),
            // which overlaps the exchange below.
            let (old, (first, interior)) = (p.old, p.interior);
            inner.spawn(move |t| {
                for (n, out) in interior.iter_mut().enumerate() {
                    let i = first + n;
                    heat.step(t, out, old, (g.cols, g.local_rows()), i..i + 1, ALPHA)?;
                }
                Ok(())
            });
            (p.old, p.boundary, p.halo)
        });
        // Each rank computes and sends its boundary row: rank 0 on this
        // task, rank 1 on a spawned one.
        let (from0, from1) = inner.join(
            |a| compute_and_send(a, heat, g, old0, out0),
            |b| compute_and_send(b, heat, g, old1, out1),
        )?;
        // Each rank receives the other's row into its halo row.
        inner.copy_from_host(&mut *halo0, &from1)?;
        inner.copy_from_host(&mut *halo1, &from0)
    })?;

    // Every task of the step has been joined: hand the rows back to their
    // buffers, which this task is now ordered after.
    drop((new0, new1));
    s.rejoin(split0)?;
    s.rejoin(split1)?;
    for r in ranks.iter_mut() {
        std::mem::swap(&mut r.u, &mut r.v);
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rt = gpu::runtime()?;
    let backend = rt.backend();
    let g = match backend {
        BackendKind::Cuda => Grid {
            rows: 258,
            cols: 256,
            steps: 20,
        },
        BackendKind::Host => Grid {
            rows: 66,
            cols: 64,
            steps: 10,
        },
    };
    let heat = Heat::load(rt)?;
    println!(
        "05-stencil: backend {backend}; {}x{} grid in 2 ranks of {} rows, {} steps; \
         the kernel {}",
        g.rows,
        g.cols,
        g.half(),
        g.steps,
        if heat.nvrtc {
            "compiled by NVRTC"
        } else {
            "not compiled (no NVRTC): its host implementation runs"
        },
    );
    let start_field = heat::initial(g.cols, g.rows);
    let start = Instant::now();
    let (field, counts) = gpu::scope(|s| {
        let mut ranks = [
            Rank::upload(s, g, 0, &start_field)?,
            Rank::upload(s, g, 1, &start_field)?,
        ];
        let before = s.runtime().counters();
        for _ in 0..g.steps {
            step(s, &heat, g, &mut ranks)?;
        }
        let counts = s.runtime().counters().since(&before);
        // The field: rank 0's rows up to its boundary row, rank 1's from
        // its boundary row (edge rows included, halos not).
        let [r0, r1] = &ranks;
        let (top, bottom) = (s.to_vec(&r0.u)?, s.to_vec(&r1.u)?);
        let half = g.half() * g.cols;
        let mut field = top[..half + g.cols].to_vec();
        field.extend_from_slice(&bottom[g.cols..]);
        Ok((field, counts))
    })?;
    let elapsed = start.elapsed();

    let want = heat::reference(start_field, g.cols, g.rows, ALPHA, g.steps);
    let (worst, at) = heat::largest_difference(&field, &want);
    println!("  {elapsed:.2?} (upload, steps, download)");
    println!(
        "  largest difference from the CPU loop: {worst:.2e} (row {}, col {})",
        at / g.cols,
        at % g.cols
    );
    println!(
        "  hand-offs during the steps: {} device waits, {} host syncs; waits avoided: {} ordered, {} same stream",
        counts.device_waits,
        counts.host_syncs,
        counts.avoided(Reason::Ordered),
        counts.avoided(Reason::SameStream),
    );
    if worst > TOLERANCE {
        return Err(
            format!("the field differs from the CPU loop by {worst:e} (> {TOLERANCE:e})").into(),
        );
    }
    println!("  matches the CPU loop (tolerance {TOLERANCE:e})");
    Ok(())
}
