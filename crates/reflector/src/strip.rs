//! Decoding an object without its `metadata.managedFields`, which are skipped while parsing
//! rather than decoded and dropped.
//!
//! k8s-openapi decodes every `managedFields[].fieldsV1` into a `serde_json::Value` tree (a
//! `BTreeMap` node of about 630 bytes per JSON object in it), where client-go keeps the raw
//! bytes: for a small ConfigMap written by one manager that is over 2 KB of heap per cached
//! object, more than the rest of it (the test `stripping_saves_the_managed_fields_heap` counts
//! 2.6 KB). A cache rarely needs them; Go users drop them with an informer transform
//! (kube-controller-manager and kube-scheduler install one; controller-runtime offers
//! `TransformStripManagedFields`), which runs only after the whole object was decoded.
//! `ApiListerWatcher` skips them by default (`strip_managed_fields(false)` keeps them), and here
//! they are never allocated: [`Stripped`] wraps any `Deserialize` type and hands it a
//! deserializer that skips the member `managedFields` of the top-level member `metadata` and
//! forwards everything else untouched, so the result equals a full decode with `managed_fields`
//! set to `None`.

use std::fmt;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::value::{BorrowedStrDeserializer, StringDeserializer};
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};

/// `T` decoded with `metadata.managedFields` skipped (see the module docs).
#[repr(transparent)]
pub(crate) struct Stripped<T>(pub(crate) T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Stripped<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        T::deserialize(Strip { inner: d, level: Level::Object }).map(Stripped)
    }
}

/// Where in the object a [`Strip`] deserializer sits.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Level {
    /// The object itself: its `metadata` member is decoded at [`Level::Metadata`].
    Object,
    /// The object's `metadata`: its `managedFields` member is skipped.
    Metadata,
}

/// A deserializer that forwards to `inner`, wrapping the maps it yields (see [`StripMap`]).
struct Strip<D> {
    inner: D,
    level: Level,
}

/// Forwards `deserialize_*` methods to the inner deserializer with the visitor wrapped.
macro_rules! wrap_visitor {
    ($($method:ident),* $(,)?) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
            self.inner.$method(StripVisitor { inner: visitor, level: self.level })
        }
    )*};
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Strip<D> {
    type Error = D::Error;

    wrap_visitor!(
        deserialize_any,
        deserialize_bool,
        deserialize_i8,
        deserialize_i16,
        deserialize_i32,
        deserialize_i64,
        deserialize_i128,
        deserialize_u8,
        deserialize_u16,
        deserialize_u32,
        deserialize_u64,
        deserialize_u128,
        deserialize_f32,
        deserialize_f64,
        deserialize_char,
        deserialize_str,
        deserialize_string,
        deserialize_bytes,
        deserialize_byte_buf,
        deserialize_option,
        deserialize_unit,
        deserialize_seq,
        deserialize_map,
        deserialize_identifier,
        deserialize_ignored_any,
    );

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_unit_struct(name, StripVisitor { inner: visitor, level: self.level })
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_newtype_struct(name, StripVisitor { inner: visitor, level: self.level })
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_tuple(len, StripVisitor { inner: visitor, level: self.level })
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_tuple_struct(name, len, StripVisitor { inner: visitor, level: self.level })
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_struct(name, fields, StripVisitor { inner: visitor, level: self.level })
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        // Enums are not objects with metadata: nothing to strip below them.
        self.inner.deserialize_enum(name, variants, visitor)
    }

    fn is_human_readable(&self) -> bool {
        self.inner.is_human_readable()
    }
}

/// A visitor that forwards to `inner`, wrapping a map (and an `Option`'s or newtype's content).
struct StripVisitor<V> {
    inner: V,
    level: Level,
}

/// Forwards `visit_*` methods that carry a plain value.
macro_rules! forward_visit {
    ($($method:ident($ty:ty)),* $(,)?) => {$(
        fn $method<E: de::Error>(self, v: $ty) -> Result<V::Value, E> {
            self.inner.$method(v)
        }
    )*};
}

impl<'de, V: Visitor<'de>> Visitor<'de> for StripVisitor<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.expecting(f)
    }

    forward_visit!(
        visit_bool(bool),
        visit_i8(i8),
        visit_i16(i16),
        visit_i32(i32),
        visit_i64(i64),
        visit_i128(i128),
        visit_u8(u8),
        visit_u16(u16),
        visit_u32(u32),
        visit_u64(u64),
        visit_u128(u128),
        visit_f32(f32),
        visit_f64(f64),
        visit_char(char),
        visit_str(&str),
        visit_borrowed_str(&'de str),
        visit_string(String),
        visit_bytes(&[u8]),
        visit_borrowed_bytes(&'de [u8]),
        visit_byte_buf(Vec<u8>),
    );

    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.inner.visit_some(Strip { inner: d, level: self.level })
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.inner.visit_newtype_struct(Strip { inner: d, level: self.level })
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        // An array is never an object's top level or its metadata: below it nothing is stripped.
        self.inner.visit_seq(seq)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.inner.visit_map(StripMap { inner: map, level: self.level, metadata_next: false })
    }

    fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
        self.inner.visit_enum(data)
    }
}

/// The members of an object: at [`Level::Object`] the value of `metadata` is decoded at
/// [`Level::Metadata`]; at [`Level::Metadata`] the member `managedFields` is skipped.
struct StripMap<A> {
    inner: A,
    level: Level,
    /// The key just handed out was the object's `metadata`.
    metadata_next: bool,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for StripMap<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, A::Error> {
        loop {
            let Some(key) = self.inner.next_key::<Key<'de>>()? else {
                return Ok(None);
            };
            let name = key.as_str();
            if self.level == Level::Metadata && name == "managedFields" {
                self.inner.next_value::<IgnoredAny>()?;
                continue;
            }
            self.metadata_next = self.level == Level::Object && name == "metadata";
            return match key {
                Key::Borrowed(s) => seed.deserialize(BorrowedStrDeserializer::<A::Error>::new(s)),
                Key::Owned(s) => seed.deserialize(StringDeserializer::<A::Error>::new(s)),
            }
            .map(Some);
        }
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, A::Error> {
        if std::mem::take(&mut self.metadata_next) {
            self.inner.next_value_seed(StripSeed { inner: seed, level: Level::Metadata })
        } else {
            self.inner.next_value_seed(seed)
        }
    }

    fn size_hint(&self) -> Option<usize> {
        self.inner.size_hint()
    }
}

/// A seed that decodes its value through [`Strip`] at `level`.
struct StripSeed<S> {
    inner: S,
    level: Level,
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for StripSeed<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Value, D::Error> {
        self.inner.deserialize(Strip { inner: d, level: self.level })
    }
}

/// A member name, borrowed from the input when it has no escapes.
enum Key<'de> {
    Borrowed(&'de str),
    Owned(String),
}

impl Key<'_> {
    fn as_str(&self) -> &str {
        match self {
            Key::Borrowed(s) => s,
            Key::Owned(s) => s,
        }
    }
}

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor<'de>(PhantomData<&'de ()>);
        impl<'de> Visitor<'de> for KeyVisitor<'de> {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a member name")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key::Borrowed(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key::Owned(v.to_owned()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key::Owned(v))
            }
        }
        d.deserialize_str(KeyVisitor(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ConfigMap, PodTemplate};
    use kube::core::DynamicObject;
    use serde::de::DeserializeOwned;
    use serde_json::{Value, json};

    use super::Stripped;

    /// A ConfigMap as kube-apiserver returns it, with two managers' entries.
    fn configmap_json() -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "cm-1",
                "namespace": "ns-1",
                "uid": "5d0c6f3e-1b7e-4d38-9a49-3f0d2f1a0c11",
                "resourceVersion": "1234",
                "creationTimestamp": "2026-12-02T10:00:00Z",
                "labels": {"app": "app-1", "shard": "shard-1", "tier": "tier-1"},
                "managedFields": [
                    {
                        "manager": "kcache-bench",
                        "operation": "Update",
                        "apiVersion": "v1",
                        "time": "2026-12-02T10:00:00Z",
                        "fieldsType": "FieldsV1",
                        "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}, "f:shard": {}, "f:tier": {}}}}
                    },
                    {
                        "manager": "kubectl",
                        "operation": "Apply",
                        "apiVersion": "v1",
                        "time": "2026-12-02T10:01:00Z",
                        "fieldsType": "FieldsV1",
                        "fieldsV1": {"f:data": {"f:key": {}}}
                    }
                ]
            },
            "data": {"key": "value"}
        })
    }

    fn full<T: DeserializeOwned>(json: &str) -> T {
        serde_json::from_str(json).unwrap()
    }

    fn stripped<T: DeserializeOwned>(json: &str) -> T {
        serde_json::from_str::<Stripped<T>>(json).unwrap().0
    }

    #[test]
    fn typed_object_equals_full_decode_without_managed_fields() {
        let text = configmap_json().to_string();
        let mut want: ConfigMap = full(&text);
        assert_eq!(want.metadata.managed_fields.as_ref().map(Vec::len), Some(2));
        want.metadata.managed_fields = None;
        assert_eq!(stripped::<ConfigMap>(&text), want);
    }

    #[test]
    fn dynamic_object_equals_full_decode_without_managed_fields() {
        let mut doc = configmap_json();
        // A member of the object named like the one stripped is data, not metadata: kept.
        doc["managedFields"] = json!(["kept"]);
        let text = doc.to_string();
        let mut want: DynamicObject = full(&text);
        want.metadata.managed_fields = None;
        let got: DynamicObject = stripped(&text);
        assert_eq!(got, want);
        assert_eq!(got.data["managedFields"], json!(["kept"]));
        assert_eq!(got.data["data"]["key"], "value");
        assert_eq!(got.types.unwrap().kind, "ConfigMap");
    }

    #[test]
    fn escaped_member_names_are_recognised() {
        let text = configmap_json()
            .to_string()
            .replace(r#""managedFields""#, r#""managed\u0046ields""#)
            .replace(r#""metadata""#, r#""meta\u0064ata""#);
        let got: ConfigMap = stripped(&text);
        assert_eq!(got.metadata.managed_fields, None);
        assert_eq!(got.metadata.labels.unwrap()["app"], "app-1");
    }

    #[test]
    fn only_the_top_level_metadata_is_touched() {
        // A pod template's own metadata is part of the object's content: its managedFields stay.
        let doc = json!({
            "metadata": {"name": "t", "managedFields": [{"manager": "a", "operation": "Update"}]},
            "template": {"metadata": {"name": "inner", "managedFields": [{"manager": "b", "operation": "Update"}]}}
        });
        let got: PodTemplate = stripped(&doc.to_string());
        assert_eq!(got.metadata.managed_fields, None);
        let inner = got.template.unwrap().metadata.unwrap().managed_fields.unwrap();
        assert_eq!(inner[0].manager.as_deref(), Some("b"));
    }

    #[test]
    fn managed_fields_of_any_shape_are_skipped_and_errors_elsewhere_still_reported() {
        // Whatever the member holds is skipped without being decoded.
        let doc = json!({"metadata": {"name": "x", "managedFields": {"not": ["a", "list", 1, null]}}});
        let got: ConfigMap = stripped(&doc.to_string());
        assert_eq!(got.metadata.name.as_deref(), Some("x"));
        // A bad value outside it is the same error as without stripping.
        let bad = json!({"metadata": {"name": 7, "managedFields": []}}).to_string();
        assert!(serde_json::from_str::<Stripped<ConfigMap>>(&bad).is_err());
        assert!(serde_json::from_str::<ConfigMap>(&bad).is_err());
        // As is invalid JSON inside it.
        let broken = r#"{"metadata":{"managedFields":[{"manager":}]}}"#;
        assert!(serde_json::from_str::<Stripped<ConfigMap>>(broken).is_err());
    }

    /// Counts heap bytes, per thread too (so parallel tests do not mix).
    #[global_allocator]
    static COUNTING: kcache_test_support::alloc::Counting = kcache_test_support::alloc::Counting;

    /// Heap bytes retained per object by `n` decoded objects.
    fn retained_per_object<T>(n: usize, decode: impl Fn() -> T) -> isize {
        let mut keep = Vec::with_capacity(n);
        let before = kcache_test_support::alloc::thread_live();
        for _ in 0..n {
            keep.push(decode());
        }
        let after = kcache_test_support::alloc::thread_live();
        drop(keep);
        (after - before) / n as isize
    }

    /// The reason the option exists: a small ConfigMap as kube-apiserver returns it, written by
    /// one manager, keeps over 2 KB of heap for its managed fields alone; stripped, they cost
    /// nothing.
    #[test]
    fn stripping_saves_the_managed_fields_heap() {
        let mut doc = configmap_json();
        doc["metadata"]["managedFields"].as_array_mut().unwrap().truncate(1);
        let with = doc.to_string();
        let mut bare = doc.clone();
        bare["metadata"].as_object_mut().unwrap().remove("managedFields");
        let bare = bare.to_string();

        let full_bytes = retained_per_object(200, || full::<ConfigMap>(&with));
        let stripped_bytes = retained_per_object(200, || stripped::<ConfigMap>(&with));
        let bare_bytes = retained_per_object(200, || full::<ConfigMap>(&bare));
        println!(
            "retained per ConfigMap: full {full_bytes} B, stripped {stripped_bytes} B, without managedFields {bare_bytes} B"
        );
        assert_eq!(stripped_bytes, bare_bytes, "stripping keeps nothing of the skipped member");
        assert!(full_bytes - stripped_bytes > 2000, "managed fields cost {} B", full_bytes - stripped_bytes);
    }

    #[test]
    fn objects_without_managed_fields_decode_unchanged() {
        let doc = json!({"metadata": {"name": "plain", "annotations": {"a": "b"}}, "data": {"k": "v"}});
        let text = doc.to_string();
        assert_eq!(stripped::<ConfigMap>(&text), full::<ConfigMap>(&text));
        assert_eq!(stripped::<DynamicObject>(&text), full::<DynamicObject>(&text));
        assert_eq!(stripped::<Value>(&text), full::<Value>(&text));
    }
}
