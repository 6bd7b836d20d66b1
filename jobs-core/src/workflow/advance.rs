//! Where a chain is advanced: what a link that is done makes its chain take (its next link,
//! pushed in the step that acknowledges it), and what a failed link finds (the links left, its
//! catch job), read before the settling call.

use uuid::Uuid;

use crate::error::Result;
use crate::queue::RedisQueue;
use crate::workflow::link::{Link, StoredLink};
use crate::workflow::progress::ChainProgress;

/// The step a finished link makes its chain take (`chain_done` in `lib/chain.lua`).
#[derive(Debug)]
pub(crate) struct ChainDone {
    /// The chain's list key.
    pub(crate) list: String,
    /// The chain's catch key.
    pub(crate) catch: String,
    /// The head of the list as read, to pop; `None` when nothing is popped.
    pub(crate) head: Option<String>,
    /// The link pushed now; `None` when the chain is over.
    pub(crate) next: Option<StoredLink>,
    /// Links put in front of the list, in order.
    pub(crate) front: Vec<String>,
    /// Links appended to the list, in order.
    pub(crate) back: Vec<String>,
    /// The batch the popped head is, which starts in the same call.
    pub(crate) starts: Option<Uuid>,
}

impl RedisQueue {
    /// The step a link that is done makes its chain take: the next link to push (one the
    /// handler prepended, else the head of the list, else one it appended) and the rest.
    /// `None` when the chain's list holds a link that does not decode: then the chain is left
    /// as it is.
    pub(crate) async fn chain_done(&self, progress: &ChainProgress) -> Result<Option<ChainDone>> {
        let id = progress.id.to_string();
        let list = self.keys().chain(&id);
        let stored = |link: &Link| link.stored(self);
        let mut front: Vec<StoredLink> = progress.prepend.iter().rev().map(stored).collect();
        let mut back: Vec<StoredLink> = progress.append.iter().map(stored).collect();
        let (head, next) = if front.is_empty() {
            let head: Option<String> = self.query(redis::cmd("LINDEX").arg(&list).arg(0)).await?;
            match head {
                Some(head) => match Link::decode(&head) {
                    Some(link) if link.starts_batch().is_some() => {
                        // The batch starts in the same call; the chain waits for it.
                        return Ok(Some(ChainDone {
                            catch: self.keys().chain_catch(&id),
                            list,
                            head: Some(head),
                            next: None,
                            front: Vec::new(),
                            back: back.into_iter().map(|(stored, ..)| stored).collect(),
                            starts: link.starts_batch(),
                        }));
                    }
                    Some(link) => {
                        let keys = self.queue_keys(&link.queue);
                        (Some(head.clone()), Some((head, link, keys)))
                    }
                    None => {
                        tracing::warn!(chain = %id, "the chain's next link is not a link; the chain stops here");
                        return Ok(None);
                    }
                },
                None if back.is_empty() => (None, None),
                None => (None, Some(back.remove(0))),
            }
        } else {
            (None, Some(front.remove(0)))
        };
        Ok(Some(ChainDone {
            catch: self.keys().chain_catch(&id),
            list,
            head,
            next,
            front: front.into_iter().map(|(stored, ..)| stored).collect(),
            back: back.into_iter().map(|(stored, ..)| stored).collect(),
            starts: None,
        }))
    }

    /// The uuids of the links the chain `id` keeps, in order.
    pub(crate) async fn chain_rest(&self, id: Uuid) -> Result<Vec<Uuid>> {
        let key = self.keys().chain(&id.to_string());
        let stored: Vec<String> = self
            .query(redis::cmd("LRANGE").arg(key).arg(0).arg(-1))
            .await?;
        Ok(stored
            .iter()
            .filter_map(|link| Link::decode(link).map(|link| link.uuid))
            .collect())
    }

    /// The catch link of the chain `id`, as stored and decoded, if it has one.
    pub(crate) async fn chain_catch(&self, id: Uuid) -> Result<Option<StoredLink>> {
        let key = self.keys().chain_catch(&id.to_string());
        let stored: Option<String> = self.query(redis::cmd("GET").arg(key)).await?;
        Ok(stored.and_then(|stored| {
            let link = Link::decode(&stored)?;
            let keys = self.queue_keys(&link.queue);
            Some((stored, link, keys))
        }))
    }
}
