//! importguard's integration tests, one binary (a module per topic): real
//! workers run with importtime and the recorder, judged. `support` holds
//! the helpers; the fixtures are the workspace's `tests/fixtures/`.

mod chains;
mod evidence;
mod support;
