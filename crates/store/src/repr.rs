//! How a store holds its objects: as the `Arc<K>`s it is given (the default), or serialized, one
//! compact JSON byte string per object, decoded again on every read (opt-in, for large caches).

use std::sync::Arc;

use crate::error::{BoxError, StoreError};

/// How a [`Store`](crate::Store) holds its objects (see [`Store::set_representation`](crate::Store::set_representation)).
///
/// A Kubernetes object decoded into its Rust type takes several times its JSON size in memory:
/// k8s-openapi's structs inline every optional member, each string and map is an allocation of
/// its own, and decoding leaves slack in every `Vec` (docs/benchmarks.md, "Where the bytes go").
/// A cache of 100k Pods holds gigabytes that way. [`Serialized`](Self::Serialized) keeps each
/// object as its compact JSON instead, so a cache costs about the objects' JSON size, and pays
/// for it with a decode on every read.
///
/// | | [`Objects`](Self::Objects) (default) | [`Serialized`](Self::Serialized) |
/// |---|---|---|
/// | what is held | the `Arc<K>` given to the store | `serde_json::to_vec(&obj)` and the key |
/// | `get`, `list`, `by_index` | clone the `Arc`: the same object every time | decode: a new `Arc<K>` per read, equal to the stored object |
/// | write | no copy | one encode; an update or delete also decodes the old object (for the indices and the update notification) |
/// | memory | the decoded objects | about their JSON size |
///
/// Users see the same objects either way (equal values, not the same allocation); a read of a
/// serialized store is no longer free, so code that lists a large cache often should keep the
/// default.
///
/// # Examples
///
/// ```
/// use kcache_store::CacheRepr;
/// assert_eq!(CacheRepr::default(), CacheRepr::Objects);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CacheRepr {
    /// Every object as the `Arc<K>` the store was given; reads hand out clones of that `Arc`.
    /// client-go's representation, and the default.
    #[default]
    Objects,
    /// Every object as its compact JSON (`serde_json`), decoded into a new `Arc<K>` on each read.
    Serialized,
    /// As [`Serialized`](Self::Serialized), each object's JSON compressed with zstd (one frame
    /// per object, level 1): a third to a half of the JSON's size again, for a decompression
    /// on each read. Only with the crate's feature `zstd`.
    Compressed,
}

/// What a store's contents are made of: how an object becomes a stored slot and back.
pub(crate) trait Repr<K>: Copy {
    /// What the item map and the index sets hold (behind an `Arc`, compared by address).
    type Slot;

    /// The representation's name.
    fn kind(&self) -> CacheRepr;

    /// The slot for `obj`, stored under `key`.
    fn pack(&self, key: &Arc<str>, obj: &Arc<K>) -> Result<Arc<Self::Slot>, StoreError>;

    /// The object a slot holds.
    fn load(&self, slot: &Arc<Self::Slot>) -> Arc<K>;

    /// [`load`](Self::load) of a slot the caller owns.
    fn load_owned(&self, slot: Arc<Self::Slot>) -> Arc<K> {
        self.load(&slot)
    }

    /// The key a slot was stored under, when the slot knows it (else the caller runs the key
    /// function on the loaded object).
    fn slot_key_of<'a>(&self, slot: &'a Self::Slot) -> Option<&'a Arc<str>>;
}

/// [`CacheRepr::Objects`]: the slot is the object.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Objects;

impl<K> Repr<K> for Objects {
    type Slot = K;
    fn kind(&self) -> CacheRepr {
        CacheRepr::Objects
    }

    #[inline]
    fn pack(&self, _key: &Arc<str>, obj: &Arc<K>) -> Result<Arc<K>, StoreError> {
        Ok(Arc::clone(obj))
    }

    #[inline]
    fn load(&self, slot: &Arc<K>) -> Arc<K> {
        Arc::clone(slot)
    }

    #[inline]
    fn load_owned(&self, slot: Arc<K>) -> Arc<K> {
        slot
    }

    #[inline]
    fn slot_key_of<'a>(&self, _slot: &'a K) -> Option<&'a Arc<str>> {
        None
    }
}

/// One object of a [`CacheRepr::Serialized`] store.
pub(crate) struct Packed {
    /// The key the object is stored under (the item map's own `Arc`), for `index_keys`.
    key: Arc<str>,
    /// The object's compact JSON, allocated at its exact length.
    bytes: Box<[u8]>,
}

/// Encodes an object for a [`Packed`] slot.
pub(crate) type EncodeFn<K> = fn(&K) -> Result<Vec<u8>, BoxError>;
/// Decodes a [`Packed`] slot's bytes; the error says where and what class of error, never
/// what the bytes held (they may be a Secret's).
pub(crate) type DecodeFn<K> = fn(&[u8]) -> Result<K, String>;

/// [`CacheRepr::Serialized`] (and [`CacheRepr::Compressed`]): the slot is the object's JSON
/// (compressed). The functions are plain pointers to serde_json instantiated where `K`'s serde
/// bounds are known ([`crate::Store::set_representation`]), so the store itself needs no serde
/// bound.
pub(crate) struct Serialized<K> {
    kind: CacheRepr,
    encode: EncodeFn<K>,
    decode: DecodeFn<K>,
}

/// serde_json's error, without its message (which may quote the input).
fn json_error(e: &serde_json::Error) -> String {
    format!("{:?} error at line {} column {}", e.classify(), e.line(), e.column())
}

impl<K> Clone for Serialized<K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K> Copy for Serialized<K> {}

impl<K: serde::Serialize + serde::de::DeserializeOwned> Serialized<K> {
    /// [`CacheRepr::Serialized`].
    pub(crate) fn json() -> Self {
        Self {
            kind: CacheRepr::Serialized,
            encode: |obj| Ok(serde_json::to_vec(obj)?),
            decode: |bytes| serde_json::from_slice(bytes).map_err(|e| json_error(&e)),
        }
    }

    /// [`CacheRepr::Compressed`]: the JSON compressed with zstd, one frame per object.
    #[cfg(feature = "zstd")]
    pub(crate) fn zstd() -> Self {
        Self {
            kind: CacheRepr::Compressed,
            encode: |obj| zstd_frames::compress(&serde_json::to_vec(obj)?),
            decode: |bytes| {
                let json = zstd_frames::decompress(bytes)?;
                serde_json::from_slice(&json).map_err(|e| json_error(&e))
            },
        }
    }
}

/// Each object's JSON as one zstd frame (level 1: a Pod's JSON compresses about as well as at
/// higher levels, at a fraction of the time), with one compression and one decompression
/// context per thread (a context is hundreds of kilobytes: making one per object would cost
/// more than the compression).
#[cfg(feature = "zstd")]
mod zstd_frames {
    use std::cell::RefCell;

    use crate::error::BoxError;

    thread_local! {
        static COMPRESSOR: RefCell<Option<zstd::bulk::Compressor<'static>>> = const { RefCell::new(None) };
        static DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
    }

    pub(super) fn compress(json: &[u8]) -> Result<Vec<u8>, BoxError> {
        COMPRESSOR.with_borrow_mut(|c| {
            let c = match c {
                Some(c) => c,
                None => c.insert(zstd::bulk::Compressor::new(1)?),
            };
            Ok(c.compress(json)?)
        })
    }

    pub(super) fn decompress(frame: &[u8]) -> Result<Vec<u8>, String> {
        let size = zstd::zstd_safe::get_frame_content_size(frame)
            .ok()
            .flatten()
            .ok_or_else(|| "zstd frame without its content size".to_owned())?;
        DECOMPRESSOR.with_borrow_mut(|d| {
            let d = match d {
                Some(d) => d,
                None => d.insert(zstd::bulk::Decompressor::new().map_err(|e| format!("zstd: {e}"))?),
            };
            d.decompress(frame, usize::try_from(size).unwrap_or(usize::MAX)).map_err(|e| format!("zstd: {e}"))
        })
    }
}

impl<K> Repr<K> for Serialized<K> {
    type Slot = Packed;
    fn kind(&self) -> CacheRepr {
        self.kind
    }

    fn pack(&self, key: &Arc<str>, obj: &Arc<K>) -> Result<Arc<Packed>, StoreError> {
        let bytes =
            (self.encode)(obj).map_err(|source| StoreError::Encode { key: key.to_string(), source })?;
        Ok(Arc::new(Packed { key: Arc::clone(key), bytes: bytes.into_boxed_slice() }))
    }

    fn load(&self, slot: &Arc<Packed>) -> Arc<K> {
        match (self.decode)(&slot.bytes) {
            Ok(obj) => Arc::new(obj),
            // The bytes are what `encode` made of a value of this very type, so this is a type
            // whose serde impls do not round-trip: a bug to report, not an input to handle. The
            // message names the key and serde_json's error class, never the object.
            Err(e) => panic!(
                "kcache-store: a serialized object did not decode (key {:?}: {e}): its type's \
                 Serialize and Deserialize do not round-trip",
                slot.key,
            ),
        }
    }

    fn slot_key_of<'a>(&self, slot: &'a Packed) -> Option<&'a Arc<str>> {
        Some(&slot.key)
    }
}
