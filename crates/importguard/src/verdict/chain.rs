//! A violation's chain as module names: who imported whom from the
//! importtime tree, or, for an attempt importtime has no line for, the
//! recorder's stack joined to the tree.

use crate::importtime::{ImportLog, NodeId, NodeKind};
use crate::recorder::ImportAttempt;

/// The import chain of a line ([`ImportLog::import_chain`]): the names,
/// and for each the name it was imported as a parent package of.
pub(super) fn import_chain_names(
    log: &ImportLog,
    id: NodeId,
) -> (Vec<String>, Vec<Option<String>>) {
    log.import_chain(id)
        .iter()
        .map(|c| {
            (
                log.name(c.node).to_owned(),
                c.parent_of.map(|r| log.name(r).to_owned()),
            )
        })
        .unzip()
}

/// The chain of an attempt importtime has no line for: the import chain of
/// the innermost executing module importtime does show, then the rest of
/// the recorder's stack, then the module.
pub(super) fn recorded_chain(
    a: &ImportAttempt,
    log: Option<&ImportLog>,
) -> (Vec<String>, Vec<Option<String>>) {
    let (mut chain, mut parent_of) = (Vec::new(), Vec::new());
    let mut from = 0;
    if let Some(log) = log {
        for (i, m) in a.stack.iter().enumerate().rev() {
            if let Some(id) = log
                .find_module(m)
                .find(|&id| log.node(id).kind == NodeKind::Entry)
            {
                (chain, parent_of) = import_chain_names(log, id);
                from = i + 1;
                break;
            }
        }
    }
    for m in a.stack[from..].iter().chain([&a.name]) {
        if !chain.contains(m) {
            chain.push(m.clone());
            parent_of.push(None);
        }
    }
    (chain, parent_of)
}
