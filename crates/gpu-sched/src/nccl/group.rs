//! Point-to-point transfers gathered in one group
//! ([`Communicator::group`]): every send and receive in it is issued
//! between one `ncclGroupStart` and `ncclGroupEnd`.

use super::{data_type, issue, Communicator, NcclType};
use crate::buffer::{DeviceSlice, DeviceSliceMut};
use crate::context::Touch;
use crate::driver::collective::pair_sends;
use crate::driver::{CallKind, DataType};
use crate::error::{Error, Result};

impl Communicator {
    /// Point-to-point transfers, issued as one group: `f` adds sends and
    /// receives ([`GroupCalls::send`], [`GroupCalls::recv`]), which are
    /// handed off, stamped and queued together once it returns `Ok`
    /// (nothing is, if it fails). The buffers stay borrowed until then. The
    /// `k`-th send from rank `a` to rank `b` goes to the `k`-th receive of
    /// `b` from `a`.
    ///
    /// # Examples
    ///
    /// Two devices swap buffers:
    ///
    /// ```
    /// # use gpu_sched::{nccl::Communicator, BackendChoice, Runtime, RuntimeOptions};
    /// # fn main() -> gpu_sched::Result<()> {
    /// # let rt = Runtime::new(RuntimeOptions { backend: BackendChoice::Host, host_devices: 2, ..RuntimeOptions::default() })?;
    /// let comm = Communicator::all_devices(&rt)?;
    /// let (t0, t1) = (rt.device(0)?.begin_task()?, rt.device(1)?.begin_task()?);
    /// let (a, b) = (t0.from_host(&[1u32; 8])?, t1.from_host(&[2u32; 8])?);
    /// let (mut a2, mut b2) = (t0.zeros::<u32>(8)?, t1.zeros::<u32>(8)?);
    /// comm.group(|g| {
    ///     g.send(0, &a, 1)?; // local rank 0 sends `a` to rank 1
    ///     g.recv(1, &mut b2, 0)?; // which receives it into `b2`
    ///     g.send(1, &b, 0)?;
    ///     g.recv(0, &mut a2, 1)
    /// })?;
    /// assert_eq!(t0.to_vec(&a2)?, vec![2; 8]);
    /// assert_eq!(t1.to_vec(&b2)?, vec![1; 8]);
    /// # Ok(()) }
    /// ```
    ///
    /// `f` may use the communicator itself, on its own thread or from
    /// tasks it joins or spawns (no lock is held while it runs): such a
    /// call is a call of its own, queued before the group's transfers.
    ///
    /// # Errors
    ///
    /// What `f` returns; with every rank local, [`Error::BadCollective`]
    /// for a send without its receive (or the reverse) or of another type,
    /// and [`Error::LengthMismatch`] for one of another length (nothing is
    /// queued); driver errors from the hand-offs; NCCL errors.
    pub fn group<'b, R>(&self, f: impl FnOnce(&mut GroupCalls<'_, 'b>) -> Result<R>) -> Result<R> {
        let mut g = GroupCalls {
            comm: self,
            calls: Vec::new(),
        };
        let r = f(&mut g)?;
        let pending = std::mem::take(&mut g.calls);
        if self.all_local() {
            let parts: Vec<_> = pending.iter().map(|p| (p.local, p.dtype, p.kind)).collect();
            pair_sends(&parts)?;
        }
        self.run(|contexts, calls| {
            for mut p in pending {
                let t = std::slice::from_mut(&mut p.touch);
                issue(&contexts[p.local], p.local, p.dtype, p.kind, t, calls)?;
            }
            Ok(())
        })?;
        Ok(r)
    }
}

/// The point-to-point calls of one [`Communicator::group`], over buffers
/// borrowed for `'b` (until the group is queued).
pub struct GroupCalls<'c, 'b> {
    comm: &'c Communicator,
    calls: Vec<GroupCall<'b>>,
}

/// A send or receive of a group, checked, to be handed off, stamped and
/// queued when the group's closure returned.
struct GroupCall<'b> {
    local: usize,
    dtype: DataType,
    kind: CallKind,
    touch: Touch<'b>,
}

impl std::fmt::Debug for GroupCalls<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupCalls")
            .field("calls", &self.calls.len())
            .finish_non_exhaustive()
    }
}

impl<'b> GroupCalls<'_, 'b> {
    /// [`Error::BadCollective`] unless `local` is a local rank and `peer` a
    /// rank.
    fn check(&self, call: &'static str, local: usize, peer: usize) -> Result<()> {
        if local >= self.comm.local_ranks() {
            return Err(Error::BadCollective {
                call,
                problem: format!("local rank {local} of {}", self.comm.local_ranks()),
            });
        }
        self.comm.check_rank(call, "the peer", peer)
    }

    /// Local rank `local` sends `buf` (memory of its device) to rank
    /// `peer`: a read of `buf`.
    ///
    /// # Errors
    ///
    /// [`Error::BadCollective`] unless `local` is a local rank and `peer`
    /// a rank; [`Error::WrongDevice`].
    pub fn send<T: NcclType, S: DeviceSlice<T> + ?Sized>(
        &mut self,
        local: usize,
        buf: &'b S,
        peer: usize,
    ) -> Result<()> {
        self.check("send", local, peer)?;
        self.comm.check_device(local, buf, "the buffer sent")?;
        self.calls.push(GroupCall {
            local,
            dtype: data_type::<T>(),
            kind: CallKind::Send {
                buf: buf.device_ptr(),
                count: buf.len(),
                peer,
            },
            touch: Touch::read(buf),
        });
        Ok(())
    }

    /// Local rank `local` receives into `buf` (memory of its device) from
    /// rank `peer`: a write of `buf`.
    ///
    /// # Errors
    ///
    /// As [`GroupCalls::send`].
    pub fn recv<T: NcclType, R: DeviceSliceMut<T> + ?Sized>(
        &mut self,
        local: usize,
        buf: &'b mut R,
        peer: usize,
    ) -> Result<()> {
        self.check("recv", local, peer)?;
        self.comm
            .check_device(local, buf, "the buffer received into")?;
        self.calls.push(GroupCall {
            local,
            dtype: data_type::<T>(),
            kind: CallKind::Recv {
                buf: buf.device_ptr(),
                count: buf.len(),
                peer,
            },
            touch: Touch::write(buf),
        });
        Ok(())
    }
}
