//! The queue layer: Laravel's Redis flow on one server, a Sentinel-managed primary or a Redis
//! Cluster.
//!
//! Its ground is the connection ([`connection`], [`sentinel`], `url.rs`, `spread.rs`), durable
//! writes ([`durability`], `durable.rs`), the key names ([`keys`]) and the Lua scripts
//! (`scripts.rs`, `scripts/*.lua`). On it, one file per operation: a job is pushed
//! (`push.rs`), reserved (`reserve.rs`), settled (`settle.rs`, with the effects of `effects.rs`), holds are renewed and freed ([`hold`]), the failed-job
//! store is read (`failed.rs`), and a queue is sized or cleared (`size.rs`). A queue's groups
//! are sub-queues of it, served in turn (`group.rs`).
//!
//! Applications reach these through [`RedisQueue`]; the operations only a worker makes are
//! methods of one door instead, `WorkerQueue` (`protocol.rs`), each written in its role's
//! file.
//!
//! Capabilities above this layer attach through its extension points and this layer imports
//! none of them: typed [`Extensions`] on the handle, settle steps that add effects to the
//! settling call (`settle.rs`), and an offline sink that a handle talking to no Redis hands
//! its pushes to (`offline.rs`). Their keys are spelled here all the same, each family in its
//! own file of [`keys`], so that every key name, and the prefix and hash tag it takes, has one
//! place.

mod call;
mod config;
pub mod connection;
mod default;
mod due;
pub mod durability;
pub(crate) mod durable;
pub(crate) mod effects;
pub(crate) mod events;
mod extensions;
pub(crate) mod failed;
mod group;
mod handle;
pub mod hold;
pub mod keys;
pub(crate) mod live;
pub(crate) mod offline;
pub(crate) mod protocol;
mod push;
mod queued;
pub(crate) mod reserve;
pub(crate) mod scripts;
pub mod sentinel;
pub(crate) mod settle;
mod size;
pub(crate) mod spread;
mod url;

pub use config::{QueueConfig, PREFIX_ENV, TLS_CA_FILE_ENV};
pub use durability::{Durability, NotDurable};
pub use extensions::Extensions;
pub use group::{GroupLimits, GroupRate, InvalidGroupRate};
pub use handle::RedisQueue;
pub(crate) use push::OPEN_STATUS_TTL;
pub use push::{DebounceDispatch, Envelope, UniqueDispatch};
#[cfg(feature = "postgres")]
pub(crate) use push::{StatusStart, UniquePush};
pub use queued::Queued;
pub use reserve::Popped;
pub use size::{QueueSize, GROUPS_READ};
pub use url::{redact_url, redis_client, redis_url_from_env, DEFAULT_REDIS_URL};

pub(crate) use default::{local_default, ThreadDefault};
pub(crate) use due::{delay_from_due, due_arg, seconds_arg};
pub(crate) use protocol::WorkerQueue;
