//! Benchmarks B1-B8, B10, B13-B17 (DESIGN "Benchmarks", DESIGN "Capturing a scope"), a file per group, each measured side by side with
//! what it is compared to, in the same process run. `cargo xtask bench` runs them
//! on the GPU machine and turns criterion's medians into the results table
//! and `ratio/B*` rows. On the host backend the raw-driver rows are skipped.
#![allow(missing_docs)] // criterion_group! generates undocumented items

use criterion::{criterion_group, criterion_main, Criterion};
use gpu::kernel::{In, LaunchConfig, Out};
use gpu::raw::RawTask;
use gpu::{BackendKind, Buffer, Runtime, TaskContext};
use gpu_kernels as k;
use std::hint::black_box;
use std::time::{Duration, Instant};

use gpu_testkit::b13;

fn rt() -> &'static Runtime {
    gpu::runtime().expect("runtime")
}

fn cuda() -> bool {
    rt().backend() == BackendKind::Cuda
}

mod blas;
mod cg;
mod cholesky;
mod chunks;
mod dag;
mod handoff;
mod launch;
mod pipeline;
mod raw;
mod record_wait;
mod spawn;

use blas::*;
use cg::*;
use cholesky::*;
use chunks::*;
use dag::*;
use handoff::*;
use launch::*;
use pipeline::*;
use record_wait::*;
use spawn::*;

/// Syncs `t`'s stream every `every` iterations so the queue stays short and
/// the CPU cost, not the device's backlog, is measured.
fn drain(t: &TaskContext, i: u64, every: u64) {
    if i % every == every - 1 {
        t.synchronize().expect("sync");
    }
}

type Group<'a> = criterion::BenchmarkGroup<'a, criterion::measurement::WallTime>;

/// Benchmarks `op`, synchronizing `t` every `every` iterations (see
/// [`drain`]).
fn bench_drained(g: &mut Group<'_>, name: &str, t: &TaskContext, every: u64, mut op: impl FnMut()) {
    g.bench_function(name, |b| {
        let mut i = 0;
        b.iter(|| {
            op();
            drain(t, i, every);
            i += 1;
        })
    });
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
}

criterion_group! {
    name = benches;
    config = config();
    targets = b1_b2_record_wait, b3_launch, b4_handoff, b5_siblings, b6_par_chunks, b7_pipeline, b8_spawn, b10_rayon, b13_dag, b14_reduce, b15_cholesky, b16_cg, b17_blas
}
criterion_main!(benches);
