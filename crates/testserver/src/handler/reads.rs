//! The read verbs: get and list, with continue tokens, resourceVersion semantics and
//! PartialObjectMetadata.

use std::sync::Arc;

use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::{DecodePaddingMode, Engine as _};
use base64::{DecodeError, alphabet};
use bytes::Bytes;
use http::Response;
use serde_json::{Value, json};

use crate::request::{Query, Route};
use kcache_protobuf::MessageType;

use crate::response::{
    ResBody, join_list, list_body, object_response, partial_object_metadata, protobuf_list, protobuf_object,
    respond, respond_protobuf, stored_protobuf,
};
use crate::state::Shared;
use crate::status::ApiError;
use crate::store::{Key, StoredObject};
use crate::validation::{
    forbidden, in_shard, invalid_list_options, parse_rv, selectors, shard_info, shard_selector,
};

/// `partial` is the `PartialObjectMetadata` apiVersion to answer in, when `Accept` asked for one.
pub(crate) fn get(
    shared: &Shared,
    route: &Route,
    partial: Option<&str>,
    protobuf: Option<MessageType>,
) -> Result<Response<ResBody>, ApiError> {
    let store = shared.store.lock();
    let name = route.name.as_deref().unwrap_or_default();
    let obj = store.get(route.res, &route.key()).ok_or_else(|| ApiError::not_found(&route.def, name))?;
    drop(store);
    if let Some(api_version) = partial {
        let partial = partial_object_metadata(&obj.bytes, api_version);
        if let Some(ty) = protobuf {
            // `ty` is PartialObjectMetadata's message; the JSON names its kind and apiVersion.
            return Ok(respond_protobuf(200, protobuf_object(ty, &partial)?, None));
        }
        return Ok(respond(200, partial, None));
    }
    if let Some(ty) = protobuf {
        return Ok(respond_protobuf(200, stored_protobuf(ty, &obj)?.envelope, None));
    }
    Ok(object_response(200, &obj))
}

/// Go's `base64.RawURLEncoding`, which continue tokens use: URL-safe and unpadded, and (not
/// being `Strict`) lenient about the unused low bits of the last character.
const RAW_URL: GeneralPurpose = GeneralPurpose::new(
    &alphabet::URL_SAFE,
    GeneralPurposeConfig::new()
        .with_encode_padding(false)
        .with_decode_allow_trailing_bits(true)
        .with_decode_padding_mode(DecodePaddingMode::RequireNone),
);

/// The offset Go's "illegal base64 data at input byte N" names when [`RAW_URL`] rejects `token`.
fn bad_byte(token: &str, e: &DecodeError) -> usize {
    match *e {
        DecodeError::InvalidByte(at, _) | DecodeError::InvalidLastSymbol(at, _) => at,
        // A lone trailing character cannot encode a byte: Go blames that character.
        DecodeError::InvalidLength(len) => len.saturating_sub(1),
        // `=` is not in Go's raw alphabet, wherever it is.
        DecodeError::InvalidPadding => token.find('=').unwrap_or(0),
    }
}

const INCONSISTENT_CONTINUE: &str = "The provided continue parameter is too old to display a consistent list \
     result. You can start a new list without the continue parameter, or use the continue token in this \
     response to retrieve the remainder of the results. Continuing with the provided token results in an \
     inconsistent list - objects that were created, modified, or deleted between the time the first chunk \
     was returned and now may show up in the list.";

/// A continue token (storage.EncodeContinue): `rv` is the list's resourceVersion, or -1 for
/// "the latest, when used" (a replacement for an expired token).
fn encode_continue(rv: i64, last: &Key) -> String {
    let token = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": format!("{}/{}\u{0}", last.0, last.1)});
    RAW_URL.encode(token.to_string().as_bytes())
}

/// Decodes a continue token into the resourceVersion to read at (`None`: the current one, for a
/// negative rv) and the key after which to start. Errors are the 400 of
/// storage.ValidateListOptions: "invalid continue token: " and storage.DecodeContinue's error.
fn decode_continue(token: &str) -> Result<(Option<u64>, Key), ApiError> {
    const INVALID: &str = "continue key is not valid";
    let bad = |why: String| ApiError::bad_request(format!("invalid continue token: {why}"));
    let bytes = RAW_URL
        .decode(token)
        .map_err(|e| bad(format!("{INVALID}: illegal base64 data at input byte {}", bad_byte(token, &e))))?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|e| bad(format!("{INVALID}: {e}")))?;
    match v["v"].as_str() {
        Some("meta.k8s.io/v1") => {}
        other => {
            return Err(bad(format!(
                "{INVALID}: server does not recognize this encoded version {}",
                other.unwrap_or_default()
            )));
        }
    }
    let rv = match v["rv"].as_i64() {
        None | Some(0) => {
            return Err(bad(format!(
                "{INVALID}: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"
            )));
        }
        Some(rv) => u64::try_from(rv).ok(),
    };
    let start = v["start"].as_str().unwrap_or_default();
    if start.is_empty() {
        return Err(bad(format!("{INVALID}: encoded start key empty (version meta.k8s.io/v1)")));
    }
    let (ns, name) = start
        .strip_suffix('\u{0}')
        .and_then(|s| s.split_once('/'))
        .ok_or_else(|| bad(format!("{INVALID}: {start}")))?;
    Ok((rv, (ns.to_string(), name.to_string())))
}

pub(crate) fn list(
    shared: &Shared,
    route: &Route,
    query: &Query,
    partial: Option<&str>,
    protobuf: Option<MessageType>,
) -> Result<Response<ResBody>, ApiError> {
    let (labels, fields) = selectors(query, &route.def)?;
    let rv_param = query.get("resourceVersion").unwrap_or_default();
    let rv_match = query.get("resourceVersionMatch").unwrap_or_default();
    let cont = query.get("continue").unwrap_or_default();
    let limit = match query.get("limit") {
        None | Some("") => 0,
        Some(l) => {
            l.parse::<i64>().map_err(|_| ApiError::bad_request(format!("limit: invalid value {l:?}")))?
        }
    };
    // ValidateListOptions for a list.
    let mut errs = Vec::new();
    if !rv_match.is_empty() {
        if rv_param.is_empty() {
            errs.push(forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            ));
        }
        if !cont.is_empty() {
            errs.push(forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden when continue is provided",
            ));
        }
        if rv_match != "Exact" && rv_match != "NotOlderThan" {
            errs.push((
                "FieldValueNotSupported",
                "resourceVersionMatch",
                format!(
                    "Unsupported value: {rv_match:?}: supported values: \"Exact\", \"NotOlderThan\", \"\""
                ),
            ));
        }
        if rv_match == "Exact" && rv_param == "0" {
            errs.push(forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            ));
        }
    }
    if query.get("sendInitialEvents").is_some() {
        errs.push(forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"));
    }
    if !errs.is_empty() {
        return Err(invalid_list_options(&errs));
    }
    // Store.ListPredicate parses the selector before the storage layer decodes the token.
    let shard = shard_selector(shared, query)?;
    // storage.ValidateListOptions: the token is decoded first, and only a resourceVersion other
    // than "" and "0" conflicts with it.
    let token = if cont.is_empty() { None } else { Some(decode_continue(cont)?) };
    if token.is_some() && !rv_param.is_empty() && rv_param != "0" {
        return Err(ApiError::bad_request("specifying resource version is not allowed when using continue"));
    }

    let store = shared.store.lock();
    let current = store.rv;
    let mut limit = usize::try_from(limit.max(0)).unwrap_or(usize::MAX);
    let (at, after) = if let Some((rv, last)) = token {
        // A token minted after its list expired says "the latest version, when used".
        let rv = rv.unwrap_or(current);
        if rv < store.history_start {
            // etcd3 handleCompactedErrorForPaging: the replacement token has rv -1.
            let mut e = ApiError::expired(INCONSISTENT_CONTINUE);
            e.status["metadata"] = json!({"continue": encode_continue(-1, &last)});
            return Err(e);
        }
        (rv, Some(last))
    } else if rv_param.is_empty() {
        (current, None)
    } else if rv_param == "0" {
        // Served "from the watch cache": the limit is ignored.
        limit = 0;
        (current, None)
    } else {
        let n = parse_rv(rv_param)?;
        if n > current {
            return Err(ApiError::too_large_resource_version(n, current));
        }
        let exact = rv_match == "Exact" || (rv_match.is_empty() && limit > 0);
        (if exact { n } else { current }, None)
    };
    let items = match store.list_at(route.res, route.namespace.as_deref(), after.as_ref(), at) {
        Ok(items) => items,
        Err(_) => return Err(ApiError::expired("The resourceVersion for the provided list is too old.")),
    };
    drop(store);

    let filtered = !labels.is_empty() || !fields.is_empty();
    let mut selected: Vec<Arc<StoredObject>> = Vec::new();
    let mut next = None;
    let mut remaining = 0usize;
    // The cacher's GetList (and etcd3's hasMore): once `limit` items are selected, a token is
    // due whenever any stored item follows the last one, matching or not; the next page may
    // then be empty.
    for (i, o) in items.iter().enumerate() {
        if in_shard(shard.as_ref(), o) && (!filtered || (labels.matches(&o.labels) && fields.matches(o))) {
            selected.push(o.clone());
        }
        if limit > 0 && selected.len() >= limit {
            if i + 1 < items.len() {
                next = Some((o.namespace.clone(), o.name.clone()));
                // PrepareContinueToken: all items read minus the limit. Without a selector
                // that is what follows the page; a shard selector does not count as one
                // (`SelectionPredicate.Empty` looks at labels and fields only), so a sharded
                // list reports the unfiltered remainder, as kube-apiserver v1.36 does.
                remaining = items.len() - selected.len();
            }
            break;
        }
    }
    let mut meta = format!("{{\"resourceVersion\":\"{at}\"");
    if let Some(last) = &next {
        meta.push_str(&format!(",\"continue\":\"{}\"", encode_continue(at as i64, last)));
        if !filtered {
            meta.push_str(&format!(",\"remainingItemCount\":{remaining}"));
        }
    }
    // asPartialObjectMetadataList copies resourceVersion, continue and remainingItemCount
    // only: a sharded PartialObjectMetadataList has no shardInfo.
    let meta_partial = format!("{meta}}}");
    if next.is_none() && route.def.is_custom() {
        // An `UnstructuredList` writes its `continue` even when empty (`omitempty` is for typed
        // lists' ListMeta); asPartialObjectMetadataList's typed list drops it again.
        meta.push_str(",\"continue\":\"\"");
    }
    meta.push_str(&shard_info(shard.as_ref()));
    meta.push('}');
    if let Some(api_version) = partial {
        let items: Vec<Bytes> =
            selected.iter().map(|o| partial_object_metadata(&o.bytes, api_version)).collect();
        let head = format!(
            "{{\"kind\":\"PartialObjectMetadataList\",\"apiVersion\":\"{api_version}\",\"metadata\":{meta_partial},\"items\":"
        );
        let body = if items.is_empty() {
            // asPartialObjectMetadataList appends to a nil slice: no items encode as `null`.
            Bytes::from(format!("{head}null}}"))
        } else {
            join_list(&format!("{head}["), items.iter().map(|b| [&b[..]]))
        };
        if let Some(ty) = protobuf {
            // `ty` is PartialObjectMetadataList's message (v1beta1's numbers its fields the other
            // way round, so the whole list is encoded from its JSON form).
            return Ok(respond_protobuf(200, protobuf_object(ty, &body)?, None));
        }
        return Ok(respond(200, body, None));
    }
    if protobuf.is_some() {
        let api_version = route.def.api_version();
        let list_ty = MessageType::for_kind(&api_version, &route.def.list_kind).ok_or_else(|| {
            ApiError::new(500, "InternalError", "Internal error occurred: no protobuf list", None)
        })?;
        let item_ty = list_ty.field_message(2).ok_or_else(|| {
            ApiError::new(500, "InternalError", "Internal error occurred: a list without items", None)
        })?;
        let items = selected
            .iter()
            .map(|o| stored_protobuf(item_ty, o).map(|f| f.raw))
            .collect::<Result<Vec<_>, _>>()?;
        let body = protobuf_list(list_ty, &api_version, &route.def.list_kind, &meta, &items)?;
        return Ok(respond_protobuf(200, body, None));
    }
    Ok(respond(200, list_body(&route.def, &meta, &selected), None))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(s: &str) -> Result<Vec<u8>, usize> {
        RAW_URL.decode(s).map_err(|e| bad_byte(s, &e))
    }

    #[test]
    fn continue_tokens_are_go_raw_url_base64() {
        for s in ["", "a", "ab", "abc", "abcd", "{\"rv\":12,\"start\":\"ns/x\"}", "\u{0}\u{ff}?>"] {
            assert_eq!(decode(&RAW_URL.encode(s.as_bytes())).unwrap(), s.as_bytes());
        }
        assert_eq!(RAW_URL.encode(b"hello"), "aGVsbG8");
        assert_eq!(RAW_URL.encode([0xfb, 0xff]), "-_8");
        // Go's RawURLEncoding is not Strict: unused low bits of the last character are ignored.
        assert_eq!(decode("aGVsbG9"), Ok(b"hello".to_vec()));
        assert_eq!(decode("!!"), Err(0));
        assert_eq!(decode("ab!d"), Err(2));
        assert_eq!(decode("abcde"), Err(4));
        assert_eq!(decode("ab+d"), Err(2));
        assert_eq!(decode("aGVsbG8="), Err(7));
    }

    #[test]
    fn continue_token_round_trip() {
        let key = ("ns".to_string(), "cm-1".to_string());
        assert_eq!(decode_continue(&encode_continue(12, &key)).unwrap(), (Some(12), key.clone()));
        assert_eq!(decode_continue(&encode_continue(-1, &key)).unwrap(), (None, key));
        let e = decode_continue("abcde").unwrap_err();
        assert_eq!(
            (e.code, e.status["message"].as_str()),
            (
                400,
                Some(
                    "invalid continue token: continue key is not valid: illegal base64 data at input byte 4"
                )
            )
        );
    }
}
