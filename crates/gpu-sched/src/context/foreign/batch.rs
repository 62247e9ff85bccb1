//! Sibling foreign operations as one batched call (DESIGN "Graphs without
//! capture by hand"): what an operation declares ([`Foreign::batchable`]),
//! and the call a graphed scope's build makes of a group of them.

use super::*;
use crate::driver::ChildGraph;

/// The batched form of a foreign operation ([`Foreign::batchable`]): given
/// a side stream that is being captured and the group's
/// [`BatchCall`], queues one call that does the work of every operation of
/// the group (`cublasSgemmBatched` for sibling `cublasSgemm`s).
pub type BatchFn = fn(&ForeignStream<'_>, &BatchCall<'_>) -> Result<()>;

/// A group of sibling foreign operations that a graphed scope's build
/// merges into one batched call: operations of one name, batched routine
/// and key ([`Foreign::batchable`]), none of which depends on another.
/// Member `m` is the `m`-th of the group (in an order that is the same at
/// every build of the same recording); buffer `b` is the `b`-th declared
/// (the reads, then the writes).
#[derive(Debug)]
pub struct BatchCall<'a> {
    key: &'a [u64],
    len: usize,
    buffers: usize,
    /// Member-major: `pointers[m * buffers + b]`.
    pointers: &'a [u64],
    /// The device address of the buffer-major pointer arrays (0 where the
    /// driver has none): array `b` at `arrays + 8 * b * len`.
    arrays: u64,
}

impl BatchCall<'_> {
    /// The key the operations declared (the same for each).
    pub fn key(&self) -> &[u64] {
        self.key
    }

    /// How many operations the group merges (at least 2).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never: a group has at least two operations.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many buffers each operation declared.
    pub fn buffers(&self) -> usize {
        self.buffers
    }

    /// The device address of member `member`'s buffer `buffer`.
    ///
    /// # Panics
    ///
    /// If `member >= self.len()` or `buffer >= self.buffers()`.
    pub fn pointer(&self, member: usize, buffer: usize) -> u64 {
        assert!(
            member < self.len && buffer < self.buffers,
            "out of the batch"
        );
        self.pointers[member * self.buffers + buffer]
    }

    /// The device address of an array of `len()` device pointers (8-byte
    /// words, in member order) to each member's buffer `buffer`: the
    /// operand a pointer-array batched call takes. It lives, unchanged,
    /// as long as the graph that runs the call.
    ///
    /// # Panics
    ///
    /// If `buffer >= self.buffers()`.
    pub fn pointer_array(&self, buffer: usize) -> u64 {
        assert!(buffer < self.buffers, "out of the batch");
        self.arrays + 8 * (buffer * self.len) as u64
    }
}

impl<'b, RE, WE, R: Reads<'b, RE>, W: Writes<'b, WE>> Foreign<'_, 'b, '_, RE, WE, R, W, ()> {
    /// [`Foreign::reuse_capture`] with `key`, and a batched form: in a
    /// graphed scope, operations of this name, `batched` routine and `key`
    /// that sibling tasks record, none depending on another (nothing
    /// orders one after another), are merged into one node when the graph
    /// is built: on CUDA the capture of one call of `batched` for all of
    /// them; on the host backend their host twins one after the other.
    /// Unless the scope turns batching off (`GraphCache::set_batching`).
    /// Outside a graphed scope it is [`Foreign::reuse_capture`].
    ///
    /// # Safety
    ///
    /// [`Foreign::reuse_capture`]'s contract for `key`, and: `batched`,
    /// given a capturing side stream and a [`BatchCall`] of any two or
    /// more such operations (each with its own buffers; the runtime
    /// merges only operations whose accesses do not conflict), queues on
    /// that stream, in a way stream capture records, work whose effects
    /// are those of each operation's device closure on its own buffers
    /// (in any order); it reads and writes only the members' declared
    /// buffers within their lengths (writing only those declared as
    /// writes) and reads the pointer arrays, and uses no other memory
    /// that other work may use while the graph lives.
    pub unsafe fn batchable(mut self, key: &[u64], batched: BatchFn) -> Self {
        // SAFETY: the caller's contract includes `reuse_capture`'s.
        self = unsafe { self.reuse_capture(key) };
        self.batch = Some(batched);
        self
    }
}

/// The node of a group of operations recorded with one [`BatchTag`]
/// (`members`, at least two, in the group's order): on CUDA the capture
/// of one call of the tag's batched routine on a side stream, with the
/// members' pointers (`arrays`: their pointer arrays on the device, laid
/// out as [`BatchCall`] says); on the host backend the members' child
/// graphs one after the other. It touches what the members touch.
pub(crate) fn batched_node(
    rt: &crate::Runtime,
    slot: usize,
    members: &[&ChildNode],
    tag: &BatchTag,
    arrays: u64,
) -> Result<NodeOp> {
    let first = members[0];
    let buffers = first.mem.len();
    let mem: SmallVec<[MemAccess; 4]> =
        members.iter().flat_map(|m| m.mem.iter().copied()).collect();
    let graph = match rt.backend() {
        BackendKind::Host => {
            let raws: Vec<u64> = members.iter().map(|m| m.graph.raw).collect();
            ChildGraph::new(rt.driver().child_join(&raws)?, rt.driver_arc())
        }
        BackendKind::Cuda => {
            let pointers: Vec<u64> = mem.iter().map(|m| m.ptr).collect();
            let call = BatchCall {
                key: &tag.key,
                len: members.len(),
                buffers,
                pointers: &pointers,
                arrays,
            };
            let (child, ()) = capture_child(rt, |side| {
                rt.driver().bind_context()?;
                let s = ForeignStream {
                    raw: side.0,
                    slot,
                    rt,
                    capturing: true,
                };
                let batched = tag.form.downcast_ref::<BatchFn>();
                (batched.expect("made by `Foreign::batchable`"))(&s, &call)
            })?;
            child
        }
    };
    Ok(NodeOp::Child(ChildNode {
        name: first.name,
        graph: Arc::new(graph),
        mem,
        batch: None,
    }))
}
