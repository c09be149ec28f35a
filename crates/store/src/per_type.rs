//! One value per type, made on first use and handed out (cloned) by every later call: the
//! shared key and namespace-index functions, which stores and FIFOs recognise by `Arc::ptr_eq`.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

/// Values by the `TypeId` of their type.
type Values = HashMap<TypeId, Box<dyn Any + Send + Sync>>;

fn values() -> MutexGuard<'static, Values> {
    static VALUES: OnceLock<Mutex<Values>> = OnceLock::new();
    VALUES.get_or_init(Mutex::default).lock().unwrap_or_else(PoisonError::into_inner)
}

/// The value of type `T`, made by `make` on the first call.
#[cfg(feature = "kube")]
pub(crate) fn get_or_make<T: Clone + Send + Sync + 'static>(make: impl FnOnce() -> T) -> T {
    let mut values = values();
    if let Some(v) = values.get(&TypeId::of::<T>()).and_then(|v| v.downcast_ref::<T>()) {
        return v.clone();
    }
    let v = make();
    values.insert(TypeId::of::<T>(), Box::new(v.clone()));
    v
}

/// The value of type `T`, if one was made.
pub(crate) fn get<T: Clone + Send + Sync + 'static>() -> Option<T> {
    values().get(&TypeId::of::<T>())?.downcast_ref::<T>().cloned()
}
