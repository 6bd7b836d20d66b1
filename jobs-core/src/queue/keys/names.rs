//! The rules for the names that keys are built from: a queue's and a group's.

// Defined with the crate's errors, which wrap it; the queue-name rule is here.
pub use crate::error::InvalidQueueName;

/// Checks that `name` can name a queue. Dispatch, bulk dispatch, the worker's `--queue` and
/// the operators' tools all apply this one rule, so a job can never be pushed where no worker
/// could take it from:
/// - not empty (the keys would be `queues:`, `queues::delayed`, ...);
/// - no comma: a worker's `--queue` (ours and Laravel's) is a comma-separated list, so no
///   worker could be told to take jobs from such a queue.
///
/// ```
/// use redjob::queue::keys::check_queue_name;
/// assert!(check_queue_name("emails").is_ok());
/// assert!(check_queue_name("mail{eu}").is_ok());
/// assert_eq!(
///     check_queue_name("").unwrap_err().to_string(),
///     "invalid queue name \"\": it is empty"
/// );
/// assert!(check_queue_name("high,low").is_err());
/// ```
pub fn check_queue_name(name: &str) -> Result<(), InvalidQueueName> {
    let reason = if name.is_empty() {
        "it is empty"
    } else if name.contains(',') {
        "it contains a comma, which separates the queues of a worker's --queue list"
    } else {
        return Ok(());
    };
    Err(InvalidQueueName {
        name: name.to_owned(),
        reason,
    })
}

/// Checks that `group` can name a group of a queue ([fair groups](crate::groups)): its keys
/// are built from it, in scripts too, so it must not look like another key's name:
/// - not empty, and at most [`MAX_GROUP_NAME`] bytes;
/// - no `:` (`queues:q:g:a:delayed` would be group `a`'s delayed set as well as group
///   `a:delayed`'s list), no `{` or `}` (a Redis Cluster hash tag), no comma, space or control
///   character.
///
/// ```
/// use redjob::queue::keys::check_group_name;
/// assert!(check_group_name("tenant-42").is_ok());
/// assert!(check_group_name("tenant:42").is_err());
/// assert!(check_group_name("").is_err());
/// ```
pub fn check_group_name(group: &str) -> Result<(), InvalidGroupName> {
    let reason = if group.is_empty() {
        "it is empty"
    } else if group.len() > MAX_GROUP_NAME {
        "it is longer than 128 bytes"
    } else if group
        .chars()
        .any(|c| matches!(c, ':' | '{' | '}' | ',') || c.is_whitespace() || c.is_control())
    {
        "it contains a colon, a brace, a comma, white space or a control character"
    } else {
        return Ok(());
    };
    Err(InvalidGroupName {
        group: group.to_owned(),
        reason,
    })
}

/// The longest group name, in bytes.
pub const MAX_GROUP_NAME: usize = 128;

// Defined with the crate's errors, which wrap it; the group-name rule is here.
pub use crate::error::InvalidGroupName;
