//! One integration-test binary for the workspace; each module is a topic.

mod bench;
mod bisect;
mod check;
mod ci_files;
mod conformance;
mod diff;
mod docs;
mod evidence;
mod help;
mod importtime;
mod launcher;
mod lazy;
mod limits;
mod live;
mod pool;
mod pyspy;
mod serve;
mod shells;
mod signals;
mod spawn_faults;
mod suggest;
mod support;
mod tcp;
mod tokio_front;
mod trace;
mod user_project;
