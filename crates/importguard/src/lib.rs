//! importguard: the evidence behind every import-boundary verdict.
//!
//! Owns the `-X importtime` parser, its log model and trees, and queries on
//! them ([`importtime`]), and the import recorder ([`recorder`]). It
//! deliberately does not render anything for people (that is `report`) nor
//! start processes (that is `spawn`).

pub mod importtime;
pub mod recorder;
pub mod verdict;
