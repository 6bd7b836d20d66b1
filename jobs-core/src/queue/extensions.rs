//! Typed extensions: one value per type, where a capability keeps its state on a handle
//! ([`RedisQueue::extensions`](crate::RedisQueue::extensions)) or on a job's context
//! ([`JobContext::extensions`](crate::JobContext::extensions)) without the layer below knowing
//! its type, as `http::Extensions` does for a request.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, RwLock};

type Map = HashMap<TypeId, Arc<dyn Any + Send + Sync>, BuildHasherDefault<TypeIdHasher>>;

/// Hashes a `TypeId`, which is a hash already, by taking it as it is: a job's context is read
/// and written several times per job, and SipHash over the id cost more than the lookup.
#[derive(Default)]
struct TypeIdHasher(u64);

impl Hasher for TypeIdHasher {
    fn write_u64(&mut self, id: u64) {
        self.0 = id;
    }

    /// `TypeId` hashes itself with `write_u64`; should it ever write bytes, they are mixed
    /// in (FNV-1a), so the map stays correct.
    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 = (self.0 ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
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
        self.write().insert(TypeId::of::<T>(), Arc::new(value));
    }

    /// The value of type `T`, if one is stored.
    pub fn get<T: Send + Sync + 'static>(&self) -> Option<Arc<T>> {
        let value = self.read().get(&TypeId::of::<T>())?.clone();
        value.downcast().ok()
    }

    /// The value of type `T`, stored first as `make` returns it when none is.
    pub fn get_or_insert_with<T: Send + Sync + 'static>(&self, make: impl FnOnce() -> T) -> Arc<T> {
        if let Some(value) = self.get::<T>() {
            return value;
        }
        let value = self
            .write()
            .entry(TypeId::of::<T>())
            .or_insert_with(|| Arc::new(make()))
            .clone();
        value.downcast().expect("stored under its own type id")
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

    #[test]
    fn bytes_written_to_the_hasher_still_tell_keys_apart() {
        let hash = |bytes: &[u8]| {
            let mut hasher = TypeIdHasher::default();
            hasher.write(bytes);
            hasher.finish()
        };
        assert_ne!(hash(b"a"), hash(b"b"));
        assert_ne!(hash(b"ab"), hash(b"ba"));
    }
}
