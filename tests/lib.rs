//! coldstart's workspace integration tests live in `it/`; fixtures (recorded
//! importtime logs, stand-in workers, stand-in packages) in `fixtures/`.
//! This library is empty on purpose: it only gives the test binary a package.
