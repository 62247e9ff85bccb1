//! Tests: a communicator's streams are its own, its checks refuse what cannot
//! match across ranks, and its host simulation orders and fails as NCCL does.

use super::*;
use crate::driver::MemAccess;
use crate::{BackendChoice, RuntimeOptions};
use gpu_epoch::Access;
use std::sync::Arc;
use std::time::Duration;

fn two_host_devices() -> Runtime {
    Runtime::new(RuntimeOptions {
        backend: BackendChoice::Host,
        host_devices: 2,
        ..RuntimeOptions::default()
    })
    .unwrap()
}

/// An operation on `t`'s stream that takes `d` and says it writes `buf`,
/// behind the ledger's back (a raw host operation, not stamped): what a
/// missing wait would leave unordered. It only says so: the detector goes
/// by what operations declare, and no memory is raced for real.
fn untracked_slow_write(t: &TaskContext, buf: &crate::Buffer<f32>, d: Duration) {
    let (_, raw) = t.bind().unwrap();
    let (ptr, bytes) = (buf.device_ptr(), buf.bytes());
    let body: Arc<dyn Fn() + Send + Sync> = Arc::new(move || std::thread::sleep(d));
    let acc = [MemAccess {
        ptr,
        bytes,
        access: Access::Write,
    }];
    // SAFETY: the body touches no memory.
    unsafe { t.rt.driver().host_op(raw, body, &acc) }.unwrap();
}

/// The detector sees a collective's parts: an all-reduce queued without
/// the hand-off that orders it after a writer of its buffer is a race.
#[test]
fn detector_flags_a_collective_without_its_hand_off() {
    let rt = two_host_devices();
    let d1 = rt.device(1).unwrap();
    let (t0, t1) = (rt.begin_task().unwrap(), d1.begin_task().unwrap());
    let a = t0.from_host(&[1.0f32; 256]).unwrap();
    let b = t1.from_host(&[2.0f32; 256]).unwrap();
    t0.synchronize().unwrap();
    t1.synchronize().unwrap();
    let writer = rt.begin_task().unwrap();
    untracked_slow_write(&writer, &a, Duration::from_millis(20));
    // The collective's parts on two other streams, queued raw: no wait.
    let (c0, c1) = (rt.begin_task().unwrap(), d1.begin_task().unwrap());
    let calls: Vec<RankCall> = [(&c0, &a), (&c1, &b)]
        .iter()
        .enumerate()
        .map(|(local, (c, buf))| {
            let p = buf.device_ptr();
            RankCall {
                local,
                stream: c.bind().unwrap().1,
                dtype: DataType::F32,
                kind: CallKind::AllReduce {
                    send: p,
                    recv: p,
                    count: buf.len(),
                    op: ReduceOp::Sum,
                },
                accesses: [MemAccess {
                    ptr: p,
                    bytes: buf.bytes(),
                    access: Access::Write,
                }]
                .into_iter()
                .collect(),
            }
        })
        .collect();
    crate::driver::host::nccl::launch(&rt.core().driver, &calls, Duration::from_secs(60)).unwrap();
    rt.synchronize().unwrap();
    d1.synchronize().unwrap();
    let races = rt.races();
    assert!(
        !races.is_empty(),
        "the detector saw the all-reduce's write race the slow write"
    );
    rt.clear_races();
}

/// The same through the communicator: the hand-off orders the part after
/// the writer (stamped this time, so the ledger knows it), and no race.
#[test]
fn the_communicator_hands_off_first() {
    let rt = two_host_devices();
    let d1 = rt.device(1).unwrap();
    let comm = Communicator::all_devices(&rt).unwrap();
    let (t0, t1) = (rt.begin_task().unwrap(), d1.begin_task().unwrap());
    let mut a = t0.from_host(&[1.0f32; 256]).unwrap();
    let mut b = t1.from_host(&[2.0f32; 256]).unwrap();
    let writer = rt.begin_task().unwrap();
    // A tracked slow write: a host operation through `tracked`.
    let (ptr, bytes) = (a.device_ptr(), a.bytes());
    writer
        .tracked("slow write", &mut [Touch::write(&mut a)], |mem, raw| {
            let body: Arc<dyn Fn() + Send + Sync> = Arc::new(move || {
                std::thread::sleep(Duration::from_millis(20));
                let v = [5.0f32; 256];
                // SAFETY: `a` is live and handed to this stream for the
                // write; it outlives the reads below.
                unsafe {
                    std::ptr::copy_nonoverlapping(v.as_ptr().cast::<u8>(), ptr as *mut u8, bytes)
                };
            });
            // SAFETY: as above.
            unsafe { rt.driver().host_op(raw, body, mem) }
        })
        .unwrap();
    comm.all_reduce(&mut [&mut a, &mut b], ReduceOp::Sum)
        .unwrap();
    assert_eq!(b.to_vec().unwrap(), vec![7.0; 256]);
    assert_eq!(a.to_vec().unwrap(), vec![7.0; 256]);
    assert_eq!(rt.races(), Vec::<String>::new());
}

#[test]
fn data_types_are_nccl_names() {
    assert_eq!(data_type::<f32>(), DataType::F32);
    assert_eq!(data_type::<f64>(), DataType::F64);
    assert_eq!(data_type::<i32>(), DataType::I32);
    assert_eq!(data_type::<u32>(), DataType::U32);
    assert_eq!(data_type::<i64>(), DataType::I64);
    assert_eq!(data_type::<u64>(), DataType::U64);
    assert_eq!(data_type::<u8>(), DataType::U8);
}

#[test]
fn unique_id_bytes_round_trip() {
    let mut bytes = [0u8; 128];
    for (i, b) in bytes.iter_mut().enumerate() {
        *b = i as u8;
    }
    let id = UniqueId::from_bytes(bytes);
    assert_eq!(id.as_bytes(), &bytes);
    assert_eq!(format!("{id:?}"), "UniqueId(0001020304050607..)");
    // Without libnccl, making one is a typed error, not a panic; with it,
    // an id.
    match Communicator::unique_id() {
        Ok(_) | Err(Error::NcclUnavailable(_)) => {}
        Err(e) => panic!("{e:?}"),
    }
}

/// A rank's part queued on a destroyed stream fails after the first part
/// was queued: the rendezvous is abandoned, so that part ends (no hang).
#[test]
fn a_part_that_cannot_be_queued_abandons_the_others() {
    let rt = two_host_devices();
    let t0 = rt.begin_task().unwrap();
    let a = t0.from_host(&[1.0f32; 16]).unwrap();
    let p = a.device_ptr();
    let kind = CallKind::AllReduce {
        send: p,
        recv: p,
        count: 16,
        op: ReduceOp::Sum,
    };
    let call = |local, stream| RankCall {
        local,
        stream,
        dtype: DataType::F32,
        kind,
        accesses: Default::default(),
    };
    let good = t0.bind().unwrap().1;
    let bad = crate::driver::RawStream(u64::MAX);
    let e = crate::driver::host::nccl::launch(
        &rt.core().driver,
        &[call(0, good), call(1, bad)],
        Duration::from_secs(60),
    )
    .unwrap_err();
    assert!(matches!(e, Error::Driver { .. }), "{e:?}");
    t0.synchronize().unwrap();
    assert_eq!(t0.to_vec(&a).unwrap(), vec![1.0; 16]);
}

/// Whether every stream of `comm`'s tasks is held by that task alone and
/// never was shared.
fn streams_are_its_own(comm: &Communicator) -> bool {
    comm.contexts.lock().iter().all(|c| {
        let Some((sid, _)) = c.slot.get() else {
            return false;
        };
        let rt = &c.rt;
        rt.core().streams.holders(sid) == 1 && !rt.ledger_rw().is_shared(sid)
    })
}

/// DESIGN "Beyond one GPU": a communicator's tasks never share a stream, even when the pool
/// has none left to give (R3 would share one): a second communicator on
/// the streams of the first could queue its parts in the other order on
/// one device than on the other, and the two calls would wait for each
/// other for good. With room for one communicator only, the second is a
/// typed error; with room for both, each has its own, and a task that
/// comes after them gets none of theirs (it shares a reclaim stream).
#[test]
fn a_communicators_streams_are_its_own_when_the_pool_runs_out() {
    for max_streams in [4, 6] {
        let rt = Runtime::new(RuntimeOptions {
            backend: BackendChoice::Host,
            host_devices: 2,
            // Two of them are the devices' reclaim streams.
            max_streams,
            warm_streams: 1,
            ..RuntimeOptions::default()
        })
        .unwrap();
        let d1 = rt.device(1).unwrap();
        // The setup's streams idle before the communicators take theirs:
        // a stream still busy is passed over for a new one while there is
        // room, which would leave the second communicator none.
        let settled = |rt: &Runtime, v: f32| {
            let t = rt.begin_task().unwrap();
            let b = t.from_host(&[v; 8]).unwrap();
            t.synchronize().unwrap();
            b
        };
        let mut a = settled(&rt, 1.0);
        let mut b = settled(&d1, 2.0);
        let first = Communicator::all_devices(&rt).unwrap();
        first
            .all_reduce(&mut [&mut a, &mut b], ReduceOp::Sum)
            .unwrap();
        assert!(streams_are_its_own(&first), "max_streams {max_streams}");
        let sum = match Communicator::all_devices(&rt) {
            Err(Error::Ledger(gpu_epoch::LedgerError::TooManyStreams { .. })) => {
                assert_eq!(max_streams, 4);
                3.0
            }
            Err(e) => panic!("{e:?}"),
            Ok(second) => {
                second
                    .all_reduce(&mut [&mut a, &mut b], ReduceOp::Sum)
                    .unwrap();
                assert!(streams_are_its_own(&second), "max_streams {max_streams}");
                assert!(streams_are_its_own(&first), "max_streams {max_streams}");
                // A task after them, with every other stream held: it
                // shares none of theirs, but the reclaim stream (DESIGN "Streams are a resource": never
                // an error).
                let late = rt.begin_task().unwrap();
                late.zeros::<f32>(8)
                    .map(drop)
                    .unwrap_or_else(|e| panic!("the late task got no stream: {e}"));
                assert!(rt.ledger().is_shared(late.stream_id()));
                assert!(streams_are_its_own(&second), "max_streams {max_streams}");
                assert!(streams_are_its_own(&first), "max_streams {max_streams}");
                6.0
            }
        };
        drop(first);
        assert_eq!(a.to_vec().unwrap(), vec![sum; 8]);
    }
}
