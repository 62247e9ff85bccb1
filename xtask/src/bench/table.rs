//! The benchmarks, one row each: [`BENCHES`]. A row says what a benchmark
//! measures, against what, where its code is, and its ratios (which rows
//! over which) with their goals. Everything else reads it: the ratio step
//! ([`add_ratios`], for `cargo xtask bench` and `--multi-gpu`), the goals
//! of both runs ([`goal`], [`goals`]), the results page and README block
//! (`report.rs`), and the table in DESIGN "Benchmarks" ([`design_table`], written by
//! `--report` between its markers). A new benchmark is its code and one
//! row here.

use std::collections::BTreeMap;

#[cfg(test)]
mod test;

/// How a ratio is judged against its goal.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Goal {
    /// The ratio must be at most this.
    AtMost(f64),
    /// The ratio must be at least this.
    AtLeast(f64),
}

impl Goal {
    pub(super) fn met(self, v: f64) -> bool {
        match self {
            Goal::AtMost(g) => v <= g,
            Goal::AtLeast(g) => v >= g,
        }
    }

    pub(super) fn text(self) -> String {
        match self {
            Goal::AtMost(g) => format!("<= {g}"),
            Goal::AtLeast(g) => format!(">= {g}"),
        }
    }
}

/// One side of a ratio: a value read from a run's rows. A `*` in a row
/// name stands for the key of a ratio named with `*` (see [`Ratio`]).
#[derive(Clone, Copy, Debug)]
pub(super) enum Term {
    /// A row.
    Row(&'static str),
    /// The first of these rows that the run has (a row that was renamed).
    FirstOf(&'static [&'static str]),
    /// The least of the rows named `prefix...`, leaving out those that end
    /// with `except`.
    Least {
        prefix: &'static str,
        except: Option<&'static str>,
    },
    /// Twice a row (ideal scaling on two GPUs).
    Twice(&'static str),
    /// A time in nanoseconds: a goal given as a time, not as another row
    /// (the row over it is the fraction of the goal).
    Ns(f64),
}

/// How a ratio is made.
#[derive(Clone, Copy, Debug)]
pub(super) enum Def {
    /// The first term over the second (no ratio when either is missing or
    /// the second is not positive).
    Over(Term, Term),
    /// The least of the ratios named by this pattern (a `*` ratio listed
    /// before it).
    LeastOf(&'static str),
}

/// A ratio: the row `ratio/<name>`. A name with a `*` is one ratio for
/// each key: every row that the numerator's `*` pattern matches (its `*`
/// a non-empty text) gives one, `*` replaced by that text everywhere.
#[derive(Clone, Copy, Debug)]
pub(super) struct Ratio {
    pub(super) name: &'static str,
    pub(super) def: Def,
    pub(super) goal: Option<Goal>,
}

impl Ratio {
    const fn at_most(self, g: f64) -> Ratio {
        Ratio {
            goal: Some(Goal::AtMost(g)),
            ..self
        }
    }

    const fn at_least(self, g: f64) -> Ratio {
        Ratio {
            goal: Some(Goal::AtLeast(g)),
            ..self
        }
    }
}

/// One benchmark.
#[derive(Debug)]
pub(super) struct Bench {
    /// Its id, the prefix of its rows (`B13` of `B13/gpu-scope`).
    pub(super) id: &'static str,
    /// What it measures (the table in DESIGN "Benchmarks").
    pub(super) what: &'static str,
    /// What that is compared with.
    pub(super) against: &'static str,
    /// Measured by `cargo xtask bench --multi-gpu` (two GPUs), not by
    /// `cargo xtask bench`.
    pub(super) multi_gpu: bool,
    /// The files that measure it, from the repository root; each names
    /// `id` (a test checks).
    pub(super) code: &'static [&'static str],
    /// Its ratios, in the order the goals are listed.
    pub(super) ratios: &'static [Ratio],
}

const fn row(name: &'static str) -> Term {
    Term::Row(name)
}

const fn least(prefix: &'static str) -> Term {
    Term::Least {
        prefix,
        except: None,
    }
}

const fn over(name: &'static str, a: Term, b: Term) -> Ratio {
    Ratio {
        name,
        def: Def::Over(a, b),
        goal: None,
    }
}

/// `over` of two rows.
const fn rows(name: &'static str, a: &'static str, b: &'static str) -> Ratio {
    over(name, row(a), row(b))
}

/// The benchmarks (DESIGN "Benchmarks"). Ratios are ours over the comparison for
/// times (lower is better) and the comparison over ours for throughputs;
/// the goal says which way.
pub(super) const BENCHES: &[Bench] = &[
    Bench {
        id: "B1",
        what: "a tracked event record",
        against: "raw `cuEventRecord`",
        multi_gpu: false,
        code: &["benches/gpu/record_wait.rs"],
        ratios: &[rows("B1", "B1/tracked", "B1/raw").at_most(1.10)],
    },
    Bench {
        id: "B2",
        what: "a tracked stream wait",
        against: "raw `cuStreamWaitEvent`",
        multi_gpu: false,
        code: &["benches/gpu/record_wait.rs"],
        ratios: &[rows("B2", "B2/tracked", "B2/raw").at_most(1.10)],
    },
    Bench {
        id: "B3",
        what: "a launch of 3 buffers; a user's kernel through the typed path (issue 13)",
        against: "raw `cuLaunchKernel`; cudarc's launch",
        multi_gpu: false,
        code: &["benches/gpu/launch.rs"],
        ratios: &[
            rows("B3", "B3/tracked", "B3/raw").at_most(1.05),
            rows("B3-vs-cudarc", "B3/tracked", "B3/cudarc"),
            rows("B3-user", "B3/user", "B3/raw").at_most(1.05),
        ],
    },
    Bench {
        id: "B4",
        what: "the seed's hand-off: a child's latency while the parent's later work runs",
        against: "the same scope without the parent's later work; the wait-for-everything \
                  policy; the child's own work",
        multi_gpu: false,
        code: &["benches/gpu/handoff.rs"],
        ratios: &[
            rows("B4", "B4/child-latency", "B4/child-latency-alone"),
            rows(
                "B4-wait-all",
                "B4/child-latency-wait-all",
                "B4/child-latency-alone",
            ),
            rows("B4-vs-own-work", "B4/child-latency", "B4/child-own-work"),
        ],
    },
    Bench {
        id: "B5",
        what: "8 sibling tasks, each a small long kernel",
        against: "one kernel's time; one stream; the wait-for-everything policy",
        multi_gpu: false,
        code: &["benches/gpu/handoff.rs"],
        ratios: &[
            rows("B5", "B5/siblings", "B5/one-kernel"),
            rows("B5-one-stream", "B5/one-stream", "B5/one-kernel"),
            rows("B5-wait-all", "B5/siblings-wait-all", "B5/one-kernel"),
        ],
    },
    Bench {
        id: "B5-cold",
        what: "`02-siblings`' measurement in fresh processes (see \"Cold start\"), each run's speed-up",
        against: "the same kernels on one stream",
        multi_gpu: false,
        code: &["benches/cold.rs"],
        ratios: &[
            rows("B5-cold-*", "B5-cold/*-one-stream", "B5-cold/*-siblings"),
            Ratio {
                name: "B5-cold-min",
                def: Def::LeastOf("B5-cold-*"),
                goal: None,
            }
            .at_least(7.5),
        ],
    },
    Bench {
        id: "B6",
        what: "`par_chunks_mut` map over 2 GiB",
        against: "one launch",
        multi_gpu: false,
        code: &["benches/gpu/chunks.rs"],
        ratios: &[rows("B6", "B6/one-launch", "B6/par-chunks")],
    },
    Bench {
        id: "B7",
        what: "`par_map` pipeline over pinned and over pageable memory; the pageable \
               pipeline's host copies alone (issue 16)",
        against: "the transfer bound; PyTorch's pipeline (pinned, pageable); one serial \
                  copy-compute-copy",
        multi_gpu: false,
        code: &["benches/gpu/pipeline.rs", "benches/torch_pipeline.py"],
        ratios: &[
            over("B7", row("B7/transfer-bound"), least("B7/par-map-pinned")).at_least(0.97),
            over("B7-vs-torch", least("B7/torch"), least("B7/par-map-pinned")).at_least(1.0),
            over(
                "B7-vs-serial",
                row("B7/copy-compute-copy"),
                least("B7/par-map-pinned"),
            ),
            over(
                "B7-pageable",
                row("B7/transfer-bound"),
                least("B7/par-map-pageable"),
            )
            .at_least(0.6),
            over(
                "B7-pageable-vs-torch",
                least("B7/pageable-torch"),
                least("B7/par-map-pageable"),
            )
            .at_least(1.0),
            rows("B7-pageable-floor", "B7/transfer-bound", "B7/host-copies"),
        ],
    },
    Bench {
        id: "B8",
        what: "spawn + join of a task launching one kernel",
        against: "the bare launch",
        multi_gpu: false,
        code: &["benches/gpu/spawn.rs"],
        ratios: &[
            over(
                "B8",
                row("B8/spawn-join"),
                Term::FirstOf(&["B8/raw-launch", "B8/bare-launch"]),
            )
            .at_most(1.5),
            over(
                "B8-wait-all",
                row("B8/spawn-join-wait-all"),
                Term::FirstOf(&["B8/raw-launch", "B8/bare-launch"]),
            ),
        ],
    },
    Bench {
        id: "B9",
        what: "the ledger's CPU costs (stamp, decision, close, mark; `cargo bench -p \
               gpu-epoch --bench ledger`)",
        against: "-",
        multi_gpu: false,
        code: &["crates/gpu-epoch/benches/ledger.rs"],
        ratios: &[],
    },
    Bench {
        id: "B10",
        what: "depth-16 join tree; 100,000 empty spawns",
        against: "Rayon, same binary",
        multi_gpu: false,
        code: &["benches/gpu/spawn.rs"],
        ratios: &[
            rows("B10-join-tree", "B10/join-tree-gpu", "B10/join-tree-rayon").at_most(2.5),
            rows("B10-spawns", "B10/spawns-gpu", "B10/spawns-rayon").at_most(1.5),
        ],
    },
    Bench {
        id: "B11",
        what: "2D heat equation, 1 -> 2 GPUs; two MPI ranks; halo hidden",
        against: "ideal scaling; PyTorch on one and two GPUs; no halo exchange",
        multi_gpu: true,
        code: &["xtask/src/bench/multi.rs", "benches/torch_multi_gpu.py"],
        ratios: &[
            over("B11-efficiency", row("B11/1-gpu"), Term::Twice("B11/2-gpu")).at_least(0.95),
            rows("B11-vs-torch", "B11/2-gpu", "B11/torch-2-gpu").at_most(0.5),
            over(
                "B11-mpi-efficiency",
                row("B11/1-gpu"),
                Term::Twice("B11-mpi/2-ranks"),
            )
            .at_least(0.90),
            rows("B11-halo-hidden", "B11/2-gpu", "B11/2-gpu-no-halo").at_most(1.03),
            rows("B11-1-gpu-vs-torch", "B11/1-gpu", "B11/torch-1-gpu"),
            over(
                "B11-torch-efficiency",
                row("B11/torch-1-gpu"),
                Term::Twice("B11/torch-2-gpu"),
            ),
        ],
    },
    Bench {
        id: "B12",
        what: "NCCL all-reduce, 1 MiB-1 GiB",
        against: "raw NCCL",
        multi_gpu: true,
        code: &["benches/b12.rs"],
        ratios: &[rows("B12-*", "B12/library-*", "B12/raw-*").at_most(1.05)],
    },
    Bench {
        id: "peer",
        what: "a 1 GiB peer copy, device 0 to 1 and back",
        against: "raw `cuMemcpyPeerAsync`; PyTorch's copy (GB/s)",
        multi_gpu: true,
        code: &["benches/multi_gpu.rs", "benches/torch_multi_gpu.py"],
        ratios: &[
            rows("peer-vs-raw", "peer/library-0to1", "peer/raw-0to1").at_least(0.95),
            rows("peer-vs-raw-1to0", "peer/library-1to0", "peer/raw-1to0"),
            rows("peer-vs-torch", "peer/library-0to1", "peer/torch-0to1"),
        ],
    },
    Bench {
        id: "B13",
        what: "10,000-task random DAG of ~10 us kernels: a scope; captured (see \"Capturing a scope\"); a \
               graphed scope (see \"Graphs without capture by hand\"), 100 iterations and its build",
        against: "the DAG by hand on 8 PyTorch streams; one CUDA graph of it; raw launches \
                  from many threads; one plain run of the scope",
        multi_gpu: false,
        code: &["benches/gpu/dag.rs", "benches/torch_dag.py"],
        ratios: &[
            rows("B13-vs-torch", "B13/gpu-scope", "B13/torch-8-streams").at_most(0.25),
            // No goal: launch by launch, the raw floor (`B13-raw-floor-vs-graph`)
            // is above 1.5 already; `B13-vs-raw-floor` is the plain scope's.
            rows("B13-vs-graph", "B13/gpu-scope", "B13/cuda-graph"),
            rows(
                "B13-capture-vs-graph",
                "B13/gpu-capture-replay",
                "B13/cuda-graph",
            )
            .at_most(1.5),
            rows(
                "B13-iter",
                "B13/gpu-graphed-serial-100",
                "B13/cuda-graph-capture-100",
            )
            .at_most(1.2),
            rows(
                "B13-iter-replays",
                "B13/gpu-graphed-serial-100",
                "B13/cuda-graph-100",
            ),
            rows(
                "B13-build",
                "B13/gpu-graphed-serial-build",
                "B13/cuda-graph-capture",
            )
            .at_most(1.0),
            rows(
                "B13-build-vs-plain",
                "B13/gpu-graphed-serial-build",
                "B13/gpu-scope",
            ),
            rows(
                "B13-build-threaded",
                "B13/gpu-graphed-build",
                "B13/gpu-scope",
            ),
            over(
                "B13-graphed-host-per-task",
                row("B13/gpu-graphed-replay-host-per-task"),
                Term::Ns(1000.0),
            )
            .at_most(1.0),
            over(
                "B13-vs-raw-floor",
                row("B13/gpu-scope"),
                Term::Least {
                    prefix: "B13/raw-launches-",
                    except: Some("-1-thread"),
                },
            )
            .at_most(1.05),
            over(
                "B13-raw-floor-vs-graph",
                Term::Least {
                    prefix: "B13/raw-launches-",
                    except: Some("-1-thread"),
                },
                row("B13/cuda-graph"),
            ),
        ],
    },
    Bench {
        id: "B14",
        what: "`par_chunks(..).map(sum).sum()` over 1 GiB, combined on the device (and on \
               the host)",
        against: "one device reduction; `torch.sum`",
        multi_gpu: false,
        code: &["benches/gpu/chunks.rs", "benches/torch_pipeline.py"],
        ratios: &[
            rows("B14", "B14/one-reduction", "B14/par-chunks-sum-device").at_least(0.9),
            rows(
                "B14-host-combine",
                "B14/one-reduction",
                "B14/par-chunks-sum",
            ),
            rows("B14-vs-torch", "B14/torch-sum", "B14/par-chunks-sum-device").at_least(0.9),
        ],
    },
    Bench {
        id: "B15",
        what: "tiled fp64 Cholesky of `11-cholesky`, n = 32768 and 8192, on 16 tasks",
        against: "PyTorch's and CuPy's one-call potrf; the same on one stream",
        multi_gpu: false,
        code: &["benches/gpu/cholesky.rs", "benches/torch_linalg.py"],
        ratios: &[
            rows("B15-vs-torch", "B15/tiled-32768", "B15/torch-32768").at_most(1.0),
            rows("B15-vs-cupy", "B15/tiled-32768", "B15/cupy-32768").at_most(1.0),
            rows("B15-8192-vs-torch", "B15/tiled-8192", "B15/torch-8192"),
            rows("B15-overlap", "B15/one-stream-32768", "B15/tiled-32768"),
        ],
    },
    Bench {
        id: "B16",
        what: "a CG step through `gpu::sparse` and `gpu::blas`, 1024^2 and 4096^2 grids; the same through a `gpu::Graphed` of 10 steps a run; the same CG with its vector updates in two fused kernels of the user's (`-fused`)",
        against: "CuPy's `cg`; a copy of the step's bytes (the memory-traffic bound); the fused step captured by hand through raw cuSPARSE, cuBLAS and driver calls and replayed (`-capture`)",
        multi_gpu: false,
        code: &["benches/gpu/cg.rs", "benches/cupy_cg.py"],
        ratios: &[
            rows("B16-small-vs-cupy", "B16/cg-small", "B16/cupy-cg-small").at_most(0.5),
            rows("B16-vs-cupy", "B16/cg", "B16/cupy-cg").at_most(1.0),
            rows("B16-vs-bound", "B16/copy-bound", "B16/cg").at_least(0.8),
            rows("B16-graphed-small", "B16/cg-small-graphed", "B16/cupy-cg-small").at_most(0.35),
            rows("B16-graphed", "B16/cg-graphed", "B16/cupy-cg").at_most(0.8),
            rows("B16-graphed-vs-plain-small", "B16/cg-small-graphed", "B16/cg-small"),
            rows("B16-fused-small-vs-cupy", "B16/cg-small-fused", "B16/cupy-cg-small"),
            rows("B16-fused-graphed-small", "B16/cg-small-fused-graphed", "B16/cupy-cg-small"),
            rows("B16-fused-graphed", "B16/cg-fused-graphed", "B16/cupy-cg"),
            rows(
                "B16-graphed-vs-capture",
                "B16/cg-small-fused-graphed",
                "B16/cg-small-fused-capture",
            )
            .at_most(1.05),
        ],
    },
    Bench {
        id: "B17",
        what: "a tracked 512 x 512 sgemm (host-side cost); 16 of them on 16 sibling tasks, \
               plain and through a graphed scope (merged into one batched call, and not)",
        against: "raw cuBLAS on the same stream; `cublasSetStream` before each call; one \
                  stream; one strided-batched call",
        multi_gpu: false,
        code: &["benches/gpu/blas.rs"],
        ratios: &[
            rows("B17", "B17/tracked", "B17/raw").at_most(1.10),
            rows("B17-setstream", "B17/raw-setstream", "B17/raw"),
            rows("B17-siblings", "B17/one-stream", "B17/siblings"),
            rows("B17-siblings-vs-batched", "B17/batched", "B17/siblings").at_least(0.5),
            rows("B17-graphed-vs-batched", "B17/batched", "B17/graphed").at_least(0.8),
            rows("B17-unbatched-vs-batched", "B17/batched", "B17/graphed-unbatched"),
            rows("B17-serial-vs-batched", "B17/batched", "B17/graphed-serial"),
        ],
    },
    Bench {
        id: "ledger",
        what: "the waits the ledger inserts that the work does not need, as a share of the \
               hand-offs' device waits: B13's DAG, the tiled Cholesky and CG run by the \
               runtime on the host backend with its wait audit on; the oracle's random programs",
        against: "the race detector's vector clocks (host backend); the oracle's (random \
                  programs, 1 M)",
        multi_gpu: false,
        code: &["benches/waits.rs", "crates/gpu-epoch/tests/oracle.rs"],
        ratios: &[
            rows(
                "ledger-unnecessary-b13",
                "ledger/b13-unnecessary",
                "ledger/b13-classified",
            )
            .at_most(0.05),
            rows(
                "ledger-unnecessary-cholesky",
                "ledger/cholesky-unnecessary",
                "ledger/cholesky-classified",
            )
            .at_most(0.05),
            rows(
                "ledger-unnecessary-cg",
                "ledger/cg-unnecessary",
                "ledger/cg-classified",
            )
            .at_most(0.05),
            rows(
                "ledger-unnecessary-random",
                "ledger/random-unnecessary",
                "ledger/random-classified",
            )
            .at_most(0.40),
        ],
    },
];

/// The text `*` stands for when `name` matches `pattern` (a non-empty
/// one), or `name` itself without a `*`.
pub(super) fn key<'a>(pattern: &str, name: &'a str) -> Option<&'a str> {
    match pattern.split_once('*') {
        Some((pre, suf)) => name
            .strip_prefix(pre)?
            .strip_suffix(suf)
            .filter(|k| !k.is_empty()),
        None => (pattern == name).then_some(""),
    }
}

impl Term {
    /// Its value in `rows`, `*` standing for `key`.
    fn value(self, rows: &BTreeMap<String, f64>, key: &str) -> Option<f64> {
        let get = |r: &str| rows.get(&r.replace('*', key)).copied();
        match self {
            Term::Row(r) => get(r),
            Term::FirstOf(rs) => rs.iter().find_map(|r| get(r)),
            Term::Least { prefix, except } => rows
                .iter()
                .filter(|(k, _)| k.starts_with(prefix) && except.is_none_or(|e| !k.ends_with(e)))
                .map(|(_, v)| *v)
                .reduce(f64::min),
            Term::Twice(r) => get(r).map(|v| 2.0 * v),
            Term::Ns(v) => Some(v),
        }
    }

    /// How DESIGN's table writes it, `group` (`B7/`) left out of the rows.
    fn text(self, group: &str) -> String {
        let short = |r: &'static str| r.strip_prefix(group).unwrap_or(r).to_string();
        match self {
            Term::Row(r) => short(r),
            Term::FirstOf(rs) => {
                rs.iter()
                    .map(|r| short(r))
                    .collect::<Vec<_>>()
                    .join(" (or ")
                    + ")"
            }
            Term::Least { prefix, except } => {
                let but = except.map(|e| format!(", not *{e}")).unwrap_or_default();
                format!("min({}*{but})", short(prefix))
            }
            Term::Twice(r) => format!("2 x {}", short(r)),
            Term::Ns(v) => format!("{v} ns"),
        }
    }
}

/// Whether the ratio `id` (without `ratio/`) is one of those `pattern`
/// names: `pattern` itself, or a key of a `*` pattern that no ratio has
/// as its own name (`B5-cold-min` is not one of `B5-cold-*`).
pub(super) fn named_by(pattern: &str, id: &str) -> bool {
    key(pattern, id).is_some() && (!pattern.contains('*') || !ratios().any(|r| r.name == id))
}

/// Every ratio of the table, in its order.
fn ratios() -> impl Iterator<Item = &'static Ratio> {
    BENCHES.iter().flat_map(|b| b.ratios)
}

/// Adds the `ratio/*` rows of [`BENCHES`] that `rows` (measured rows) give.
pub(super) fn add_ratios(rows: &mut BTreeMap<String, f64>) {
    let mut new: Vec<(String, f64)> = Vec::new();
    for r in ratios() {
        match r.def {
            Def::Over(a, b) => {
                let keys: Vec<String> = match (r.name.contains('*'), a) {
                    (true, Term::Row(p)) => rows
                        .keys()
                        .filter_map(|k| key(p, k).map(str::to_owned))
                        .collect(),
                    _ => vec![String::new()],
                };
                for k in keys {
                    if let (Some(a), Some(b)) = (a.value(rows, &k), b.value(rows, &k)) {
                        if b > 0.0 {
                            new.push((format!("ratio/{}", r.name.replace('*', &k)), a / b));
                        }
                    }
                }
            }
            Def::LeastOf(pattern) => {
                let least = new
                    .iter()
                    .filter(|(n, _)| {
                        n.strip_prefix("ratio/")
                            .is_some_and(|n| named_by(pattern, n))
                    })
                    .map(|(_, v)| *v)
                    .reduce(f64::min);
                if let Some(v) = least {
                    new.push((format!("ratio/{}", r.name), v));
                }
            }
        }
    }
    rows.extend(new);
}

/// The goal of row `name` (`ratio/...`), if it has one: its ratio's, the
/// ratio named exactly so first, else the `*` ratio it matches.
pub(super) fn goal(name: &str) -> Option<Goal> {
    let id = name.strip_prefix("ratio/")?;
    ratios().find(|r| named_by(r.name, id))?.goal
}

/// The ratios with a goal, in the table's order: their benchmark, name
/// (with `*` where it stands for each key) and goal.
pub(super) fn goals() -> impl Iterator<Item = (&'static Bench, &'static str, Goal)> {
    BENCHES.iter().flat_map(|b| {
        b.ratios
            .iter()
            .filter_map(move |r| Some((b, r.name, r.goal?)))
    })
}

/// The table in DESIGN "Benchmarks", made from [`BENCHES`] (between its markers).
pub(super) fn design_table() -> String {
    let mut s = String::from(
        "| id | what | compared with | ratios: `ratio/<name>` = rows (goal) | code |\n\
         |---|---|---|---|---|\n",
    );
    for b in BENCHES {
        let group = format!("{}/", b.id);
        let ratios: Vec<String> = b
            .ratios
            .iter()
            .map(|r| {
                let def = match r.def {
                    Def::Over(a, b) => format!("{} / {}", a.text(&group), b.text(&group)),
                    Def::LeastOf(p) => format!("min(`{p}`)"),
                };
                let goal = r
                    .goal
                    .map(|g| format!(" ({})", g.text()))
                    .unwrap_or_default();
                format!("`{}` = {def}{goal}", r.name)
            })
            .collect();
        let code: Vec<String> = b.code.iter().map(|c| format!("`{c}`")).collect();
        s.push_str(&format!(
            "| {}{} | {} | {} | {} | {} |\n",
            b.id,
            if b.multi_gpu { " (2 GPUs)" } else { "" },
            b.what,
            b.against,
            if ratios.is_empty() {
                "-".to_string()
            } else {
                ratios.join("<br>")
            },
            code.join(", ")
        ));
    }
    s.push_str(
        "\nThis table is made by `cargo xtask bench --report` from `BENCHES` in \
         `xtask/src/bench/table.rs`, which also computes the ratios of every run and gives \
         the goals that judge the committed runs (`benches/results/README.md`); rows under \
         a benchmark's own id are written without it. A new benchmark is its code and one \
         row there.\n",
    );
    s
}
