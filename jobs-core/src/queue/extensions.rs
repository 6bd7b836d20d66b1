//! Typed extensions: one value per type, where a capability keeps its state on a handle
//! ([`RedisQueue::extensions`](crate::RedisQueue::extensions)) or on a job's context
//! ([`JobContext::extensions`](crate::JobContext::extensions)) without the layer below knowing
//! its type, as `http::Extensions` does for a request.

use std::any::{Any, TypeId};
use std::fmt;
use std::sync::{Arc, RwLock};

use smallvec::SmallVec;

type Value = Arc<dyn Any + Send + Sync>;

/// The values by type. A handle holds a handful and a job's context one or two (its
/// workflow's state), so a list searched in order beats a hash map: no hashing, and the first
/// two kept inline, where a map would allocate its table for every job that keeps one.
type Map = SmallVec<[(TypeId, Value); 2]>;

fn position(map: &Map, id: TypeId) -> Option<usize> {
    map.iter().position(|(stored, _)| *stored == id)
}

/// A map from a type to one value of it. Cheap to clone: clones share their values, so what a
/// capability stores on a handle is seen by every clone of that handle.
///
/// ```
/// use redjob::queue::Extensions;
///
/// struct Tenant(&'static str);
///
/// let extensions = Extensions::default();
/// extensions.insert(Tenant("acme"));
/// assert_eq!(extensions.get::<Tenant>().unwrap().0, "acme");
/// assert!(extensions.get::<u32>().is_none());
/// assert_eq!(*extensions.get_or_insert_with(|| 7_u32), 7);
/// ```
#[derive(Clone, Default)]
pub struct Extensions {
    map: Arc<RwLock<Map>>,
}

impl Extensions {
    /// Stores `value`, replacing the value of its type stored before, if any.
    pub fn insert<T: Send + Sync + 'static>(&self, value: T) {
        let (id, value): (TypeId, Value) = (TypeId::of::<T>(), Arc::new(value));
        let mut map = self.write();
        match position(&map, id) {
            Some(at) => map[at].1 = value,
            None => map.push((id, value)),
        }
    }

    /// The value of type `T`, if one is stored.
    pub fn get<T: Send + Sync + 'static>(&self) -> Option<Arc<T>> {
        let map = self.read();
        let at = position(&map, TypeId::of::<T>())?;
        map[at].1.clone().downcast().ok()
    }

    /// The value of type `T`, stored first as `make` returns it when none is.
    pub fn get_or_insert_with<T: Send + Sync + 'static>(&self, make: impl FnOnce() -> T) -> Arc<T> {
        if let Some(value) = self.get::<T>() {
            return value;
        }
        let id = TypeId::of::<T>();
        let mut map = self.write();
        // Another clone may have stored one since the read.
        let at = match position(&map, id) {
            Some(at) => at,
            None => {
                map.push((id, Arc::new(make())));
                map.len() - 1
            }
        };
        map[at]
            .1
            .clone()
            .downcast()
            .expect("stored under its own type id")
    }

    /// Whether `self` and `other` are clones of one another, sharing their values.
    pub(crate) fn shared_with(&self, other: &Extensions) -> bool {
        Arc::ptr_eq(&self.map, &other.map)
    }

    /// Whether no other clone of these extensions is left.
    pub(crate) fn is_only_clone(&self) -> bool {
        Arc::strong_count(&self.map) == 1
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Map> {
        self.map.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Map> {
        self.map.write().unwrap_or_else(|e| e.into_inner())
    }
}

impl fmt::Debug for Extensions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Extensions")
            .field("values", &self.read().len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_of_many_types_are_kept_apart() {
        struct A(u8);
        struct B(u8);
        let extensions = Extensions::default();
        extensions.insert(A(1));
        extensions.insert(B(2));
        extensions.insert(3_u8);
        extensions.insert(4_u16);
        extensions.insert(5_u32);
        extensions.insert(6_u64);
        extensions.insert("seven");
        extensions.insert(String::from("eight"));
        assert_eq!(extensions.get::<A>().unwrap().0, 1);
        assert_eq!(extensions.get::<B>().unwrap().0, 2);
        assert_eq!(*extensions.get::<u8>().unwrap(), 3);
        assert_eq!(*extensions.get::<u16>().unwrap(), 4);
        assert_eq!(*extensions.get::<u32>().unwrap(), 5);
        assert_eq!(*extensions.get::<u64>().unwrap(), 6);
        assert_eq!(*extensions.get::<&str>().unwrap(), "seven");
        assert_eq!(*extensions.get::<String>().unwrap(), "eight");
        assert!(extensions.get::<i8>().is_none());
        extensions.insert(A(9));
        assert_eq!(extensions.get::<A>().unwrap().0, 9);
        assert_eq!(extensions.read().len(), 8);
    }
}
