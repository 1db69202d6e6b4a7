//! `coldstart importtime --format json`'s answer: an importtime log's
//! import tree. `report::importtime::json_tree` streams it straight from
//! the parsed log (a torch log has hundreds of thousands of lines), so the
//! shape is written down here rather than held in a type.
//!
//! # JSON schema (`"schema": "coldstart.importtime/1"`)
//! ```text
//! { "schema": "coldstart.importtime/1",
//!   "encoding": str,                     // how the log's bytes were decoded
//!   "lines": int,                        // the log's line count
//!   "sessions": [ { "index": int,        // one per `import time:` header
//!                   "header_line": int | null,
//!                   "roots": [Node] } ],
//!   "warnings": [ { "line": int, "message": str, "detail": ... } ] }  // lines that were not imports
//! Node = { "name": str, "self_us": int, "cumulative_us": int, "line": int,
//!          "cached": "known" | "ambiguous",   // only on a cached line
//!          "children": [Node] }
//! ```

/// The `schema` of the JSON answer.
pub const SCHEMA: &str = "coldstart.importtime/1";
