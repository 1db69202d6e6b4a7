//! pystacks's integration tests, one binary (a module per topic): real
//! CPython processes read from outside. `support` holds the helpers;
//! `../fixtures/` the Python programs read.

mod collapsed_format;
mod denied;
mod dump;
mod native;
mod sampler;
mod support;
