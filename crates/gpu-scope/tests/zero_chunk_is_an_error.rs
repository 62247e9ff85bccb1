//! A chunk size of zero is a typed error, from the free function and from
//! inside a task, and no task runs.

mod common;

use common::{assert_no_races, runtime};
use gpu::Error;

#[test]
fn zero_chunk_size_is_error_zero_chunk() {
    let rt = runtime();
    let mut buf = rt.begin_task().unwrap().zeros::<f32>(16).unwrap();
    let e = gpu::par_chunks_mut(&mut buf, 0)
        .for_each(|_t, _c| panic!("no chunk task may run"))
        .unwrap_err();
    assert!(matches!(e, Error::ZeroChunk), "{e}");

    let e = gpu::scope_on(&rt, |s| {
        s.par_chunks_mut(&mut buf, 0, |_t, _c| panic!("no chunk task may run"))
    })
    .unwrap_err();
    assert!(matches!(e, Error::ZeroChunk), "{e}");
    assert_no_races(&rt);
}
