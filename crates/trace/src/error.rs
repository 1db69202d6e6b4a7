//! What can be wrong with a trace before it is written.

/// A trace the writers refuse: each says which process, thread or flow
/// broke which rule of [`Trace::check`](crate::Trace::check).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Two processes with one pid.
    #[error("the trace has process {pid} twice; merge its threads into one process")]
    DuplicateProcess {
        /// The pid.
        pid: u32,
    },
    /// Two threads of one process with one tid.
    #[error("process {pid} has thread {tid} twice; merge its slices into one thread")]
    DuplicateThread {
        /// The process.
        pid: u32,
        /// The thread.
        tid: u32,
    },
    /// A slice that ends before it begins.
    #[error("slice {name:?} on thread {tid} of process {pid} ends before it begins")]
    Backwards {
        /// The process.
        pid: u32,
        /// The thread.
        tid: u32,
        /// The slice.
        name: String,
    },
    /// Two slices of one thread that overlap without nesting.
    #[error(
        "slices {outer:?} and {inner:?} on thread {tid} of process {pid} overlap without one \
         holding the other; a thread's slices must nest"
    )]
    Overlap {
        /// The process.
        pid: u32,
        /// The thread.
        tid: u32,
        /// The slice begun first.
        outer: String,
        /// The one that outlives it.
        inner: String,
    },
    /// Two flows with one id.
    #[error("flow id {id} is used twice; give each flow its own id")]
    DuplicateFlow {
        /// The id.
        id: u64,
    },
    /// A flow whose end is no slice of the trace.
    #[error(
        "flow {id} ends at slice {index} of thread {tid} of process {pid}, which the trace does not have"
    )]
    FlowEnd {
        /// The flow.
        id: u64,
        /// The process it names.
        pid: u32,
        /// The thread it names.
        tid: u32,
        /// The slice index it names.
        index: usize,
    },
}
