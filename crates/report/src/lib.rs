//! report: renderers that turn coldstart's results into text for people
//! (terminal trees and tables, Markdown) and files for tools (JSON,
//! collapsed stacks, flame graph SVG, speedscope).
//!
//! Owns formatting only: it reads the models of `importguard` and `phases`
//! and never parses logs, runs processes or computes statistics itself.

#![warn(missing_docs)]

pub mod bench;
pub mod boundary;
pub mod diff;
pub mod importtime;
pub mod profile;
