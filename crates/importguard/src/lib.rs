//! importguard: the evidence behind every import-boundary verdict.
//!
//! Owns the `-X importtime` parser, its log model and trees, and queries on
//! them ([`importtime`]); the one rule of what is first-party code
//! ([`firstparty`]); the import recorder ([`recorder`]); and the
//! forbidden-module policy and its verdicts ([`verdict`]). It deliberately
//! does not render anything for people (that is `report`) nor start
//! processes (that is `spawn`).

#![warn(missing_docs)]

pub mod firstparty;
pub mod importtime;
pub mod recorder;
pub mod verdict;
