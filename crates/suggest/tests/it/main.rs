//! The suggest crate against real workers: fixture projects run with the
//! import recorder and importtime, judged, classified by a real
//! interpreter, patched, verified and run again.

mod chains;
mod errors;
mod fixtures;
mod support;
