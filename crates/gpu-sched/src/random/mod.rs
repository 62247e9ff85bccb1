//! cuRAND on a task's stream (§14). (Being built.)

/// A runtime's cuRAND objects, per stream slot.
#[derive(Debug, Default)]
pub(crate) struct Generators {}

impl Generators {
    /// Destroys every idle object: the runtime's streams are idle (its
    /// drop synchronized them) and its context current.
    pub(crate) fn clear(&self) {}
}
