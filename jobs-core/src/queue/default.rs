//! The default handle that `.dispatch()` uses when it is given none: one scoped to the running
//! future, else one installed on the current thread, else the process-wide one.

use std::cell::RefCell;
use std::future::Future;
use std::sync::OnceLock;

use crate::error::Result;
use crate::queue::handle::RedisQueue;

static PROCESS_DEFAULT: OnceLock<RedisQueue> = OnceLock::new();

tokio::task_local! {
    /// The default handle of the dispatches of a future run by [`RedisQueue::scope`].
    static SCOPED_DEFAULT: RedisQueue;
}

thread_local! {
    /// Handles installed on this thread ([`RedisQueue::install_on_thread`]), the last one in
    /// force.
    static THREAD_DEFAULTS: RefCell<Vec<RedisQueue>> = const { RefCell::new(Vec::new()) };
}

/// The default handle that is local to the running code: the one scoped to the running future
/// ([`RedisQueue::scope`]), else the one last installed on this thread
/// ([`RedisQueue::install_on_thread`]), if any.
pub(crate) fn local_default() -> Option<RedisQueue> {
    SCOPED_DEFAULT
        .try_with(RedisQueue::clone)
        .ok()
        .or_else(|| THREAD_DEFAULTS.with(|installed| installed.borrow().last().cloned()))
}

/// A handle installed as its thread's default; dropping it uninstalls it.
#[derive(Debug)]
pub(crate) struct ThreadDefault {
    handle: RedisQueue,
    // Installed on one thread: uninstalled there.
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Drop for ThreadDefault {
    fn drop(&mut self) {
        THREAD_DEFAULTS.with(|installed| {
            let mut installed = installed.borrow_mut();
            let mine = installed
                .iter()
                .rposition(|handle| handle.extensions().shared_with(self.handle.extensions()));
            if let Some(at) = mine {
                installed.remove(at);
            }
        });
    }
}

impl RedisQueue {
    /// The default handle that `.dispatch()` uses: the one scoped to the running future
    /// ([`RedisQueue::scope`]), else one installed on this thread (a fake queue of
    /// [`crate::testing`]), else the process-wide one given to [`RedisQueue::set_default`],
    /// else one opened from `REDIS_URL` on first use.
    pub fn default_handle() -> Result<Self> {
        if let Some(handle) = local_default() {
            return Ok(handle);
        }
        if let Some(queue) = PROCESS_DEFAULT.get() {
            return Ok(queue.clone());
        }
        let queue = Self::from_env()?;
        Ok(PROCESS_DEFAULT.get_or_init(|| queue).clone())
    }

    /// `via`, the handle a dispatch was given, else the [default handle](Self::default_handle).
    pub(crate) fn given_or_default(via: Option<RedisQueue>) -> Result<Self> {
        match via {
            Some(queue) => Ok(queue),
            None => Self::default_handle(),
        }
    }

    /// `future`, with this handle as the default handle of the dispatches it makes while it
    /// runs (on whatever thread polls it), instead of the process-wide one.
    pub fn scope<F: Future>(&self, future: F) -> impl Future<Output = F::Output> {
        SCOPED_DEFAULT.scope(self.clone(), future)
    }

    /// Makes `queue` the process-wide default. Returns `false`, changing nothing, when a
    /// default was already set or used.
    pub fn set_default(queue: RedisQueue) -> bool {
        PROCESS_DEFAULT.set(queue).is_ok()
    }

    /// Makes this handle the current thread's default until the returned guard is dropped
    /// (then the one installed before it, if any, is again).
    pub(crate) fn install_on_thread(&self) -> ThreadDefault {
        THREAD_DEFAULTS.with(|installed| installed.borrow_mut().push(self.clone()));
        ThreadDefault {
            handle: self.clone(),
            _not_send: std::marker::PhantomData,
        }
    }
}
