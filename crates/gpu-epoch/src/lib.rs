//! # gpu-epoch: the epoch ledger
//!
//! A citation such as `DESIGN "Soundness"` in this crate names a
//! section of the design note, `docs/DESIGN.md` at the repository's root.
//!
//! Each stream's work is split into *epochs*. Buffers are stamped with the
//! epoch of their last use; recording an event or synchronizing a stream
//! closes the current epoch. Two facts then make a cross-stream wait
//! unnecessary:
//!
//! - **Completed**: the host saw the epoch finish (stream or event
//!   synchronize, or a query that found an event done).
//! - **Ordered**: the new stream waited on the device for an event that
//!   covers the epoch.
//!
//! The [`Ledger`] holds stream orders, event coverage ([`EventCoverage`]) and
//! buffer stamps ([`BufferStamps`]), and *decides* ([`Ledger::hand_off`]);
//! the runtime (`gpu-sched`) acts. It has no CUDA dependency and no method
//! blocks: the runtime hands its driver calls to [`Ledger::record`],
//! [`Ledger::event_complete`], [`Ledger::stream_wait`] and
//! [`Ledger::stream_sync`], which make them with no lock held (R14). See
//! `README.md` beside this crate for the rules.

mod counters;
mod event;
mod ids;
mod ledger;
mod primitive;
mod seqlock;
mod set;
mod stamp;
mod task;

pub use counters::{CounterSnapshot, Reason};
pub use event::{EventCoverage, RecordTicket, WaitTicket};
pub use ids::{Generation, StreamEpoch, StreamId, TaskId};
pub use ledger::{Binding, Closed, Decision, HandOffFacts, Ledger, LedgerError};
pub use set::{StreamSet, MAX_STREAMS};
pub use stamp::{Access, BufferStamps, Use, Uses, MAX_ENTRIES, WHOLE};
pub use task::Task;
