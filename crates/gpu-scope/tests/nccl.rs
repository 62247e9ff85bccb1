//! Collectives and point-to-point transfers between devices (DESIGN "Beyond one GPU",
//! `gpu::nccl`): tracked operations ordered by the ledger like kernels.
//! Each case runs on the host backend simulating two devices (its
//! collectives are threads meeting at a rendezvous; one race detector over
//! both devices, so a missing wait is a reported race) and, ignored unless
//! asked for, on two CUDA GPUs with NCCL.

use gpu::memory::DeviceSliceMut;
use gpu::nccl::{Communicator, ReduceOp};
use gpu::{Buffer, Error, Runtime};
use gpu_kernels as ops;
use std::time::Duration;

mod common;
use common::two_device_tests;

two_device_tests!(
    "needs two CUDA GPUs and NCCL":
    all_reduce_gives_every_device_the_sum,
    all_reduce_waits_for_a_slow_writer_and_orders_later_readers,
    all_reduce_ops_and_types,
    all_reduce_of_views_and_out_of_place,
    broadcast_copies_the_root_everywhere,
    reduce_scatter_gives_each_rank_its_part,
    all_gather_concatenates_in_rank_order,
    send_recv_exchanges_halo_rows,
    collectives_in_a_loop_with_kernels_between,
    bad_input_gives_typed_errors_and_runs_nothing,
);

const N: usize = 1 << 14;
/// Long enough that a collective not ordered after the kernel would read
/// early.
const SPIN: Duration = Duration::from_millis(30);

/// Buffers of `len` elements, device `d`'s filled with `value(d)`.
fn per_device<T: gpu::memory::DeviceRepr>(
    comm: &Communicator,
    len: usize,
    value: impl Fn(usize) -> T,
) -> Vec<Buffer<T>> {
    (0..comm.local_ranks())
        .map(|d| {
            let rt = comm.device(d).unwrap();
            rt.begin_task()
                .unwrap()
                .from_host(&vec![value(d); len])
                .unwrap()
        })
        .collect()
}

fn all_mut<B>(bufs: &mut [B]) -> Vec<&mut B> {
    bufs.iter_mut().collect()
}

fn all_reduce_gives_every_device_the_sum(rt: &Runtime) {
    let comm = Communicator::all_devices(rt).unwrap();
    let n = comm.local_ranks();
    assert_eq!(n, rt.device_count());
    assert_eq!(comm.rank_count(), n);
    assert_eq!(comm.rank(1), Some(1));
    assert!(comm.device(1).unwrap().same(&rt.device(1).unwrap()));
    let mut bufs = per_device(&comm, N, |d| d as f32 + 1.0);
    comm.all_reduce(&mut all_mut(&mut bufs), ReduceOp::Sum)
        .unwrap();
    let sum = (n * (n + 1) / 2) as f32;
    for b in &bufs {
        assert!(b.to_vec().unwrap().iter().all(|&v| v == sum));
    }
}

fn all_reduce_waits_for_a_slow_writer_and_orders_later_readers(rt: &Runtime) {
    let comm = Communicator::all_devices(rt).unwrap();
    let mut bufs = per_device(&comm, N, |_| 1.0f32);
    // A slow kernel writes device 0's input (1 -> 2) on a task's stream:
    // the all-reduce must wait for it on the device.
    let t0 = rt.begin_task().unwrap();
    ops::spin_touch(&t0, &mut bufs[0], SPIN).unwrap();
    let before = rt.counters();
    comm.all_reduce(&mut all_mut(&mut bufs), ReduceOp::Sum)
        .unwrap();
    assert!(
        rt.counters().since(&before).device_waits >= 1,
        "the all-reduce waited for the kernel on the device"
    );
    // Later kernels on each device are ordered after it: each doubles the
    // sum (2 + 1 on device 0, 1 on the others).
    let sum = 2.0 + (comm.local_ranks() - 1) as f32;
    for (d, b) in bufs.iter_mut().enumerate() {
        let t = comm.device(d).unwrap().begin_task().unwrap();
        ops::scale(&t, b, 2.0f32).unwrap();
        assert!(
            t.to_vec(b).unwrap().iter().all(|&v| v == 2.0 * sum),
            "device {d}"
        );
    }
    // And a writer after the all-reduce on device 0, by another task, is
    // ordered after it too (the detector would see a write while the
    // collective reads).
    let mut bufs2 = per_device(&comm, N, |_| 1.0f32);
    comm.all_reduce(&mut all_mut(&mut bufs2), ReduceOp::Sum)
        .unwrap();
    ops::fill(&t0, &mut bufs2[0], 7.0f32).unwrap();
    assert!(t0.to_vec(&bufs2[0]).unwrap().iter().all(|&v| v == 7.0));
    assert!(bufs2[1]
        .to_vec()
        .unwrap()
        .iter()
        .all(|&v| v == comm.local_ranks() as f32));
}

fn all_reduce_ops_and_types(rt: &Runtime) {
    let comm = Communicator::all_devices(rt).unwrap();
    let n = comm.local_ranks() as i32;
    for (op, want) in [
        (ReduceOp::Sum, (1..=n).sum::<i32>()),
        (ReduceOp::Prod, (1..=n).product::<i32>()),
        (ReduceOp::Max, n),
        (ReduceOp::Min, 1),
    ] {
        let mut bufs = per_device(&comm, 1000, |d| d as i32 + 1);
        comm.all_reduce(&mut all_mut(&mut bufs), op).unwrap();
        for b in &bufs {
            assert_eq!(b.to_vec().unwrap(), vec![want; 1000], "{op:?}");
        }
    }
    let mut f = per_device(&comm, 333, |d| 0.5f64 * (d as f64 + 1.0));
    comm.all_reduce(&mut all_mut(&mut f), ReduceOp::Max)
        .unwrap();
    assert_eq!(f[0].to_vec().unwrap(), vec![0.5 * n as f64; 333]);
    let mut u = per_device(&comm, 77, |d| 200u8 + d as u8);
    comm.all_reduce(&mut all_mut(&mut u), ReduceOp::Min)
        .unwrap();
    assert_eq!(u[1].to_vec().unwrap(), vec![200u8; 77]);
}

fn all_reduce_of_views_and_out_of_place(rt: &Runtime) {
    let comm = Communicator::all_devices(rt).unwrap();
    let n = comm.local_ranks();
    // In place on the middle half of each buffer: the rest stays.
    let mut bufs = per_device(&comm, 1024, |d| d as f32 + 1.0);
    {
        let mut views: Vec<_> = bufs
            .iter_mut()
            .map(|b| b.slice_mut(256..768).unwrap())
            .collect();
        comm.all_reduce(&mut all_mut(&mut views), ReduceOp::Sum)
            .unwrap();
    }
    let sum = (n * (n + 1) / 2) as f32;
    for (d, b) in bufs.iter().enumerate() {
        let v = b.to_vec().unwrap();
        assert!(v[..256].iter().all(|&x| x == d as f32 + 1.0));
        assert!(v[256..768].iter().all(|&x| x == sum));
        assert!(v[768..].iter().all(|&x| x == d as f32 + 1.0));
    }
    // Out of place: the inputs stay; a buffer and a view mixed, as `dyn`.
    let send = per_device(&comm, 512, |d| 10.0 * (d as f32 + 1.0));
    let mut recv = per_device(&comm, 1024, |_| 0.0f32);
    let (r0, rest) = recv.split_at_mut(1);
    let mut half = r0[0].slice_mut(..512).unwrap();
    let mut whole_rest: Vec<&mut dyn DeviceSliceMut<f32>> = vec![&mut half];
    let mut others: Vec<_> = rest
        .iter_mut()
        .map(|b| b.slice_mut(512..).unwrap())
        .collect();
    for o in others.iter_mut() {
        whole_rest.push(o);
    }
    let sends: Vec<&Buffer<f32>> = send.iter().collect();
    comm.all_reduce_into(&sends, &mut whole_rest, ReduceOp::Sum)
        .unwrap();
    drop(whole_rest);
    drop(others);
    assert!(recv[0].to_vec().unwrap()[..512]
        .iter()
        .all(|&x| x == 10.0 * sum));
    assert!(recv[1].to_vec().unwrap()[512..]
        .iter()
        .all(|&x| x == 10.0 * sum));
    assert!(send[1].to_vec().unwrap().iter().all(|&x| x == 20.0));
}

fn broadcast_copies_the_root_everywhere(rt: &Runtime) {
    let comm = Communicator::all_devices(rt).unwrap();
    let mut bufs = per_device(&comm, N, |d| d as f32 * 3.0);
    // The root's data comes from a slow kernel (1 * 3 + 1).
    let t1 = rt.device(1).unwrap().begin_task().unwrap();
    ops::spin_touch(&t1, &mut bufs[1], SPIN).unwrap();
    comm.broadcast(&mut all_mut(&mut bufs), 1).unwrap();
    for b in &bufs {
        assert!(b.to_vec().unwrap().iter().all(|&v| v == 4.0));
    }
}

fn reduce_scatter_gives_each_rank_its_part(rt: &Runtime) {
    let comm = Communicator::all_devices(rt).unwrap();
    let n = comm.local_ranks();
    let part = 1000;
    // Device d sends part q filled with (d + 1) * (q + 1).
    let send: Vec<Buffer<f32>> = (0..n)
        .map(|d| {
            let host: Vec<f32> = (0..n * part)
                .map(|i| ((d + 1) * (i / part + 1)) as f32)
                .collect();
            comm.device(d)
                .unwrap()
                .begin_task()
                .unwrap()
                .from_host(&host)
                .unwrap()
        })
        .collect();
    let mut recv = per_device(&comm, part, |_| 0.0f32);
    let sends: Vec<&Buffer<f32>> = send.iter().collect();
    comm.reduce_scatter(&sends, &mut all_mut(&mut recv), ReduceOp::Sum)
        .unwrap();
    let ranks_sum = (n * (n + 1) / 2) as f32;
    for (q, r) in recv.iter().enumerate() {
        let want = ranks_sum * (q + 1) as f32;
        assert!(r.to_vec().unwrap().iter().all(|&v| v == want), "rank {q}");
    }
}

fn all_gather_concatenates_in_rank_order(rt: &Runtime) {
    let comm = Communicator::all_devices(rt).unwrap();
    let n = comm.local_ranks();
    let send = per_device(&comm, 300, |d| d as u32 + 5);
    let mut recv = per_device(&comm, 300 * n, |_| 0u32);
    let sends: Vec<&Buffer<u32>> = send.iter().collect();
    comm.all_gather(&sends, &mut all_mut(&mut recv)).unwrap();
    let want: Vec<u32> = (0..n * 300).map(|i| (i / 300) as u32 + 5).collect();
    for r in &recv {
        assert_eq!(r.to_vec().unwrap(), want);
    }
}

/// Each device holds rows `[halo, interior.., halo]` of a grid split
/// between the devices by rows: device `d`'s interior rows are all `d + 1`.
/// One exchange fills each halo from the neighbour's edge row.
fn send_recv_exchanges_halo_rows(rt: &Runtime) {
    let comm = Communicator::all_devices(rt).unwrap();
    let n = comm.local_ranks();
    let (w, rows) = (256, 6);
    let mut grids: Vec<Buffer<f32>> = (0..n)
        .map(|d| {
            let mut host = vec![d as f32 + 1.0; w * (rows + 2)];
            host[..w].fill(-1.0);
            host[w * (rows + 1)..].fill(-1.0);
            let t = comm.device(d).unwrap().begin_task().unwrap();
            let mut g = t.from_host(&host).unwrap();
            // The last interior row is written by a slow kernel (+ 1).
            let mut last = g.slice_mut(w * rows..w * (rows + 1)).unwrap();
            ops::spin_touch(&t, &mut last, SPIN).unwrap();
            g
        })
        .collect();
    let mut splits: Vec<_> = grids
        .iter_mut()
        .map(|g| g.split_chunks(w).unwrap())
        .collect();
    {
        let mut rows_of: Vec<_> = splits.iter_mut().map(|s| s.views()).collect();
        // Each device's rows: [top halo, first, .., last, bottom halo].
        let mut parts: Vec<_> = rows_of
            .iter_mut()
            .map(|v| {
                let (top, rest) = v.split_first_mut().unwrap();
                let (bottom, rest) = rest.split_last_mut().unwrap();
                let (first, rest) = rest.split_first_mut().unwrap();
                let last = rest.last_mut().unwrap();
                (top, first, last, bottom)
            })
            .collect();
        comm.group(|g| {
            for (d, (top, first, last, bottom)) in parts.iter_mut().enumerate() {
                if d > 0 {
                    g.send(d, &**first, d - 1)?;
                    g.recv(d, &mut **top, d - 1)?;
                }
                if d + 1 < n {
                    g.send(d, &**last, d + 1)?;
                    g.recv(d, &mut **bottom, d + 1)?;
                }
            }
            Ok(())
        })
        .unwrap();
    }
    for (d, s) in splits.into_iter().enumerate() {
        let t = comm.device(d).unwrap().begin_task().unwrap();
        t.rejoin(s).unwrap();
    }
    for (d, g) in grids.iter().enumerate() {
        let v = g.to_vec().unwrap();
        let top = if d > 0 { d as f32 + 1.0 } else { -1.0 }; // neighbour's last row, touched
        let bottom = if d + 1 < n { d as f32 + 2.0 } else { -1.0 }; // neighbour's first row
        assert!(v[..w].iter().all(|&x| x == top), "device {d} top halo");
        assert!(
            v[w * (rows + 1)..].iter().all(|&x| x == bottom),
            "device {d} bottom halo"
        );
        assert!(v[w..w * rows].iter().all(|&x| x == d as f32 + 1.0));
        assert!(v[w * rows..w * (rows + 1)]
            .iter()
            .all(|&x| x == d as f32 + 2.0));
    }
}

fn collectives_in_a_loop_with_kernels_between(rt: &Runtime) {
    let comm = Communicator::all_devices(rt).unwrap();
    let n = comm.local_ranks() as f32;
    let mut bufs = per_device(&comm, 4096, |_| 1.0f32);
    let tasks: Vec<_> = (0..comm.local_ranks())
        .map(|d| comm.device(d).unwrap().begin_task().unwrap())
        .collect();
    let mut want = 1.0f32;
    for i in 0..12 {
        // x = n * (x + 1), with the + 1 as a kernel on each device's own task.
        for (t, b) in tasks.iter().zip(bufs.iter_mut()) {
            ops::add_scalar(t, b, 1.0f32).unwrap();
        }
        comm.all_reduce(&mut all_mut(&mut bufs), ReduceOp::Sum)
            .unwrap();
        want = n * (want + 1.0);
        if i % 4 == 3 {
            // Scaled back down so that the values stay exact.
            for (t, b) in tasks.iter().zip(bufs.iter_mut()) {
                ops::fill(t, b, 1.0f32).unwrap();
            }
            want = 1.0;
        }
    }
    for (t, b) in tasks.iter().zip(&bufs) {
        assert!(t.to_vec(b).unwrap().iter().all(|&v| v == want));
    }
}

fn bad_input_gives_typed_errors_and_runs_nothing(rt: &Runtime) {
    let comm = Communicator::all_devices(rt).unwrap();
    let mut bufs = per_device(&comm, 64, |d| d as f32 + 1.0);
    // Device 1's buffer in device 0's place.
    let mut swapped: Vec<&mut Buffer<f32>> = bufs.iter_mut().rev().collect();
    let e = comm.all_reduce(&mut swapped, ReduceOp::Sum).unwrap_err();
    assert!(matches!(e, Error::WrongDevice { .. }), "{e:?}");
    // One buffer short.
    let e = comm
        .all_reduce(&mut all_mut(&mut bufs)[..1], ReduceOp::Sum)
        .unwrap_err();
    assert!(matches!(e, Error::BadCollective { .. }), "{e:?}");
    // Lengths that differ.
    let mut short = per_device(&comm, 63, |_| 0.0f32);
    let mut mixed: Vec<&mut Buffer<f32>> = vec![&mut bufs[0]];
    mixed.extend(short.iter_mut().skip(1));
    let e = comm.all_reduce(&mut mixed, ReduceOp::Sum).unwrap_err();
    assert!(matches!(e, Error::LengthMismatch { .. }), "{e:?}");
    // A root that is no rank.
    let e = comm.broadcast(&mut all_mut(&mut bufs), 9).unwrap_err();
    assert!(matches!(e, Error::BadCollective { .. }), "{e:?}");
    // A receive buffer of the wrong length for the all-gather.
    let sends: Vec<&Buffer<f32>> = short.iter().collect();
    let e = comm
        .all_gather(&sends, &mut all_mut(&mut bufs))
        .unwrap_err();
    assert!(matches!(e, Error::LengthMismatch { .. }), "{e:?}");
    // A send without its receive; a send of another length than its
    // receive; a peer that is no rank.
    let (b0, b1) = bufs.split_at_mut(1);
    let e = comm.group(|g| g.send(0, &b0[0], 1)).unwrap_err();
    assert!(matches!(e, Error::BadCollective { .. }), "{e:?}");
    let e = comm
        .group(|g| {
            g.send(0, &b0[0], 1)?;
            g.recv(1, &mut short[1], 0)
        })
        .unwrap_err();
    assert!(matches!(e, Error::LengthMismatch { .. }), "{e:?}");
    let e = comm.group(|g| g.recv(1, &mut b1[0], 7)).unwrap_err();
    assert!(matches!(e, Error::BadCollective { .. }), "{e:?}");
    let e = comm.group(|g| g.recv(0, &mut b1[0], 1)).unwrap_err();
    assert!(matches!(e, Error::WrongDevice { .. }), "{e:?}");
    // (The communicator called inside its own group is no error: a call of
    // its own, tests/nccl_never_hangs.rs.)
    // Nothing ran.
    for (d, b) in bufs.iter().enumerate() {
        assert_eq!(b.to_vec().unwrap(), vec![d as f32 + 1.0; 64]);
    }
    // And the communicator still works.
    comm.all_reduce(&mut all_mut(&mut bufs), ReduceOp::Max)
        .unwrap();
    let top = comm.local_ranks() as f32;
    assert_eq!(bufs[0].to_vec().unwrap(), vec![top; 64]);
    // One process holds every rank on the host backend: no communicator
    // across processes there.
    if rt.backend() == gpu::BackendKind::Host {
        let id = gpu::nccl::UniqueId::from_bytes([7; 128]);
        // SAFETY: refused before any rank could meet (host backend).
        let e = unsafe { Communicator::with_id(rt, id, 0, 2) }.unwrap_err();
        assert!(matches!(e, Error::Unsupported(_)), "{e:?}");
    }
    let id = gpu::nccl::UniqueId::from_bytes([7; 128]);
    // SAFETY: refused before any rank could meet (no rank 2 of 2).
    let e = unsafe { Communicator::with_id(rt, id, 2, 2) }.unwrap_err();
    assert!(matches!(e, Error::BadCollective { .. }), "{e:?}");
}
