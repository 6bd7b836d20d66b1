//! Middleware defined once by name, for dispatches to ask for by that name.
//!
//! A dispatch cannot carry code, so [`PendingDispatch::through`](crate::PendingDispatch::through)
//! writes names into the payload, and the worker runs the middleware defined under each name.
//! Define them at startup, in every process that runs workers.

use std::collections::HashMap;
use std::sync::{OnceLock, RwLock};

use super::Layer;

fn registry() -> &'static RwLock<HashMap<String, Layer>> {
    static NAMED: OnceLock<RwLock<HashMap<String, Layer>>> = OnceLock::new();
    NAMED.get_or_init(RwLock::default)
}

/// Defines the middleware `name` stands for in [`PendingDispatch::through`]; a second
/// definition replaces the first.
///
/// ```
/// use redjob::middleware::{define, find, Skip};
/// define("never", Skip::when(true));
/// assert!(find("never").is_some());
/// assert!(find("undefined").is_none());
/// ```
///
/// [`PendingDispatch::through`]: crate::PendingDispatch::through
pub fn define(name: impl Into<String>, middleware: impl Into<Layer>) {
    registry()
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .insert(name.into(), middleware.into());
}

/// The middleware defined as `name`.
pub fn find(name: &str) -> Option<Layer> {
    registry()
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .get(name)
        .cloned()
}
