//! Raw driver calls through cudarc, no tracking: what B1-B3 and B8
//! compare against.
use cudarc::driver::sys;

pub(crate) fn record(ev: u64, s: u64) {
    // SAFETY: both are live handles of the runtime's context, which is
    // current on this thread (the runtime made it so).
    let r = unsafe { sys::cuEventRecord(ev as sys::CUevent, s as sys::CUstream) };
    assert_eq!(r, sys::CUresult::CUDA_SUCCESS);
}

pub(crate) fn wait(s: u64, ev: u64) {
    // SAFETY: as above.
    let r = unsafe { sys::cuStreamWaitEvent(s as sys::CUstream, ev as sys::CUevent, 0) };
    assert_eq!(r, sys::CUresult::CUDA_SUCCESS);
}

/// cuStreamQuery; true when the stream is idle.
pub(crate) fn stream_query(s: u64) -> bool {
    // SAFETY: as above.
    let r = unsafe { sys::cuStreamQuery(s as sys::CUstream) };
    r == sys::CUresult::CUDA_SUCCESS
}

/// cuEventQuery; true when the event's record is done.
pub(crate) fn event_query(e: u64) -> bool {
    // SAFETY: as above.
    let r = unsafe { sys::cuEventQuery(e as sys::CUevent) };
    r == sys::CUresult::CUDA_SUCCESS
}

/// cuLaunchKernel with pointer and u64 arguments.
pub(crate) fn launch(f: u64, s: u64, grid: u32, block: u32, args: &mut [u64]) {
    // On the stack, as a hand-written launch would: no allocation in
    // the baseline.
    let mut params = [std::ptr::null_mut::<std::ffi::c_void>(); 8];
    assert!(args.len() <= params.len());
    for (p, a) in params.iter_mut().zip(args.iter_mut()) {
        *p = a as *mut u64 as *mut _;
    }
    // SAFETY: `f` is a loaded function whose parameters are 8-byte
    // pointers and integers, matching `args`; the context is current.
    let r = unsafe {
        sys::cuLaunchKernel(
            f as sys::CUfunction,
            grid,
            1,
            1,
            block,
            1,
            1,
            0,
            s as sys::CUstream,
            params.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    };
    assert_eq!(r, sys::CUresult::CUDA_SUCCESS);
}
