//! The store's error types: key, index and store errors.

/// A boxed error from user-supplied code (index functions, transformers, key functions).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A key function could not produce a key, or a key could not be parsed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The object has no name, so it has no key.
    #[error("object has no name")]
    MissingName,
    /// A key does not have the form `name` or `namespace/name`.
    #[error("unexpected key format: {key:?}")]
    InvalidKey {
        /// The key that could not be split.
        key: String,
    },
    /// A user-supplied key function failed.
    #[error("key function failed")]
    Custom(#[source] BoxError),
    /// An index function used as a key function (see
    /// [`index_func_to_key_func`](crate::index_func_to_key_func)) gave more than one value.
    #[error("too many keys: {keys:?}")]
    TooManyKeys {
        /// The values the index function gave.
        keys: Vec<String>,
    },
    /// An index function used as a key function (see
    /// [`index_func_to_key_func`](crate::index_func_to_key_func)) gave no value.
    #[error("unexpected empty indexKeys")]
    EmptyIndexKeys,
}

/// An index lookup or index update failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IndexError {
    /// No indexer is registered under this name.
    #[error("index with name {name} does not exist")]
    NoSuchIndex {
        /// The index name that was asked for.
        name: String,
    },
    /// `add_indexers` was given a name that is already registered.
    #[error("indexer conflict: {names:?}")]
    Conflict {
        /// The names registered twice, sorted.
        names: Vec<String>,
    },
    /// An index function returned an error; the store was left unchanged.
    #[error("unable to calculate an index entry for key {key:?} on index {index:?}")]
    IndexFunc {
        /// The key of the object being indexed.
        key: String,
        /// The index whose function failed.
        index: String,
        /// What the index function returned.
        #[source]
        source: BoxError,
    },
}

/// A write into a store or a FIFO failed; nothing was changed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The key function failed on an object.
    #[error("couldn't compute the object's key")]
    Key(#[from] KeyError),
    /// An index function failed.
    #[error("couldn't update the indices")]
    Index(#[from] IndexError),
    /// A FIFO's transformer failed on an object.
    #[error("transformer failed")]
    Transform(#[source] BoxError),
    /// A store that keeps objects serialized ([`CacheRepr::Serialized`](crate::CacheRepr))
    /// could not encode one.
    #[error("couldn't encode the object stored under key {key:?}")]
    Encode {
        /// The object's key.
        key: String,
        /// serde_json's error (or the compressor's).
        #[source]
        source: BoxError,
    },
    /// The representation needs a feature of kcache-store this build lacks
    /// ([`CacheRepr::Compressed`](crate::CacheRepr::Compressed) needs `zstd`).
    #[error("cache representation {representation:?} needs a feature this build lacks")]
    Unsupported {
        /// The representation asked for.
        representation: crate::CacheRepr,
    },
}

/// `Result` with the store's error as default.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;
