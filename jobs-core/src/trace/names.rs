//! The names OpenTelemetry's messaging conventions give our spans' broker and queues.

use crate::queue::keys::ready_list;

/// `messaging.system` on every span: the queue's broker.
pub(super) const MESSAGING_SYSTEM: &str = "redis";

/// `messaging.destination.name` of a queue: its list's key without the prefix, as Laravel's
/// package names it.
pub(super) fn destination(queue: &str) -> String {
    ready_list(queue)
}
