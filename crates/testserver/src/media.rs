//! Content negotiation: which request bodies the server decodes (`Content-Type`, 415 otherwise)
//! and which responses it can write (`Accept`, 406 otherwise), with kube-apiserver's messages
//! (apiserver `endpoints/handlers/negotiation`).
//!
//! This server reads JSON only, and writes JSON and, for the reads of built-in kinds (get, list,
//! watch, and their errors), Kubernetes' protobuf (kcache-protobuf's encoder, which writes
//! kube-apiserver's bytes). kube-apiserver also speaks YAML (and CBOR behind a gate): a client
//! that prefers one of them and also accepts JSON gets JSON, as from a server without that
//! serializer; custom resources have no protobuf form, so a client preferring protobuf gets JSON
//! for them, as from kube-apiserver. A body in another format gets kube-apiserver's 415 listing
//! what this server does decode, never a misleading JSON parse error.

use kcache_protobuf::MessageType;

use crate::status::ApiError;

/// The media types this server decodes and encodes, in kube-apiserver's order.
pub(crate) const SUPPORTED: &[&str] = &["application/json"];
/// The same for watch streams (`MediaTypesForSerializer`'s stream types).
const SUPPORTED_STREAM: &[&str] = &["application/json;stream=watch"];

/// What a response is to hold, as the `Accept` header asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Output {
    /// The objects themselves, as JSON.
    Json,
    /// `PartialObjectMetadata` / `PartialObjectMetadataList` (kube's `*_metadata` calls).
    PartialObjectMetadata,
    /// The objects as Kubernetes' protobuf: this message (a built-in kind's).
    Protobuf(MessageType),
}

impl Output {
    /// The protobuf message, when the response is protobuf.
    pub(crate) fn protobuf(self) -> Option<MessageType> {
        match self {
            Output::Protobuf(ty) => Some(ty),
            _ => None,
        }
    }
}

/// One clause of an `Accept` header (goautoneg's `Accept`).
#[derive(Debug)]
struct Clause {
    ty: String,
    sub: String,
    q: f32,
    params: Vec<(String, String)>,
}

/// goautoneg's `ParseAccept`: clauses sorted by quality, then by specificity (concrete types
/// before wildcards, more parameters first); the sort is stable.
fn parse_accept(header: &str) -> Vec<Clause> {
    let mut clauses: Vec<Clause> = header
        .split(',')
        .filter_map(|part| {
            let mut pieces = part.split(';');
            let range = pieces.next()?.trim();
            let (ty, sub) = match range.split_once('/') {
                Some((t, s)) => (t.trim().to_ascii_lowercase(), s.trim().to_ascii_lowercase()),
                None if range == "*" => ("*".to_string(), "*".to_string()),
                None => return None,
            };
            let mut q = 1.0;
            let mut params = Vec::new();
            for p in pieces {
                let Some((k, v)) = p.split_once('=') else { continue };
                let (k, v) = (k.trim().to_string(), v.trim().trim_matches('"').to_string());
                if k == "q" {
                    q = v.parse().unwrap_or(1.0);
                } else {
                    params.push((k, v));
                }
            }
            Some(Clause { ty, sub, q, params })
        })
        .collect();
    clauses.sort_by(|a, b| {
        b.q.total_cmp(&a.q)
            .then_with(|| (a.ty == "*").cmp(&(b.ty == "*")))
            .then_with(|| (a.sub == "*").cmp(&(b.sub == "*")))
            .then_with(|| b.params.len().cmp(&a.params.len()))
    });
    clauses
}

/// `NegotiateOutputMediaType` (and its stream twin for watches): the first clause, in
/// preference order, that this server can write. A clause asking for a conversion this server
/// does not make (`as=Table`) is skipped, as kube-apiserver skips one its endpoint does not
/// allow, so kubectl's `as=Table, application/json` list gets JSON.
///
/// # Errors
///
/// 406 NotAcceptable with kube-apiserver's message when no clause fits.
/// `protobuf` is the message of the resource's kind when it has one (a built-in kind, for get,
/// list and watch): a clause asking for `application/vnd.kubernetes.protobuf` then gets it.
pub(crate) fn negotiate_output(
    accept: Option<&str>,
    watch: bool,
    protobuf: Option<MessageType>,
) -> Result<Output, ApiError> {
    let accept = accept.unwrap_or_default().trim();
    if accept.is_empty() {
        return Ok(Output::Json);
    }
    let mut table_asked = false;
    for clause in parse_accept(accept) {
        if let Some(ty) = protobuf
            && clause.ty == "application"
            && clause.sub == "vnd.kubernetes.protobuf"
            && clause.params.iter().all(|(k, v)| k == "stream" && (v.is_empty() || (watch && v == "watch")))
        {
            return Ok(Output::Protobuf(ty));
        }
        let type_ok =
            matches!((clause.ty.as_str(), clause.sub.as_str()), ("application", "json" | "*") | ("*", "*"));
        if !type_ok {
            continue;
        }
        let mut output = Output::Json;
        let mut ok = true;
        let (mut kind, mut group, mut version) = (None, None, None);
        for (k, v) in &clause.params {
            match k.as_str() {
                "as" => kind = Some(v.as_str()),
                "g" => group = Some(v.as_str()),
                "v" => version = Some(v.as_str()),
                // The JSON serializer streams; "watch" is the only stream schema.
                "stream" if !v.is_empty() && v != "watch" => ok = false,
                // A server-version pin is never allowed (`AllowsServerVersion` is false).
                "sv" if !v.is_empty() => ok = false,
                _ => {}
            }
        }
        if kind.is_some() || group.is_some() || version.is_some() {
            match (kind.unwrap_or_default(), group.unwrap_or_default(), version.unwrap_or_default()) {
                ("PartialObjectMetadata" | "PartialObjectMetadataList", "meta.k8s.io", "v1") => {
                    output = Output::PartialObjectMetadata;
                }
                ("Table", ..) => {
                    table_asked = true;
                    ok = false;
                }
                _ => ok = false,
            }
        }
        if ok {
            return Ok(output);
        }
    }
    let supported = if watch { SUPPORTED_STREAM } else { SUPPORTED };
    let mut message = format!("only the following media types are accepted: {}", supported.join(", "));
    if table_asked {
        message.push_str(" (Table output is not supported by kcache-testserver)");
    }
    Err(ApiError::new(406, "NotAcceptable", message, None))
}

/// go-restful's 406 for a built-in resource, which kube-apiserver's router answers before the
/// handler negotiates (`ServiceErrorHandler`, `NewGenericServerResponse`): the representations
/// of the route, as kube-apiserver v1.36.3 lists them (collections also stream watches).
pub(crate) fn restful_not_acceptable(collection: bool) -> ApiError {
    let available =
        if collection { "application/json, application/json;stream=watch" } else { "application/json" };
    ApiError::new(
        406,
        "NotAcceptable",
        format!("406: Not Acceptable\n\nAvailable representations: {available}"),
        Some(serde_json::json!({})),
    )
}

/// go-restful's 415 for a PATCH of a built-in resource whose Content-Type the route does not
/// consume.
pub(crate) fn restful_unsupported_media_type() -> ApiError {
    ApiError::new(415, "UnsupportedMediaType", "415: Unsupported Media Type", Some(serde_json::json!({})))
}

/// `NegotiateInputSerializer` for a create, update or DeleteOptions body: an empty
/// `Content-Type` is JSON, as kube-apiserver defaults it to its first serializer.
///
/// # Errors
///
/// 415 UnsupportedMediaType with kube-apiserver's message for any other media type, protobuf
/// included (this server decodes only JSON).
pub(crate) fn check_input(content_type: &str) -> Result<(), ApiError> {
    let media = content_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    if media.is_empty() || SUPPORTED.contains(&media.as_str()) {
        return Ok(());
    }
    Err(unsupported_media_type(SUPPORTED))
}

/// `NewUnsupportedMediaTypeError(accepted)`.
pub(crate) fn unsupported_media_type(accepted: &[&str]) -> ApiError {
    ApiError::new(
        415,
        "UnsupportedMediaType",
        format!(
            "the body of the request was in an unknown format - accepted media types include: {}",
            accepted.join(", ")
        ),
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_negotiation() {
        let json = Ok(Output::Json);
        let meta = Ok(Output::PartialObjectMetadata);
        assert_eq!(negotiate_output(None, false, None).map_err(|e| e.code), json);
        assert_eq!(negotiate_output(Some("*/*"), false, None).map_err(|e| e.code), json);
        assert_eq!(negotiate_output(Some("application/json"), false, None).map_err(|e| e.code), json);
        assert_eq!(
            negotiate_output(Some("application/vnd.kubernetes.protobuf, application/json"), false, None)
                .map_err(|e| e.code),
            json
        );
        assert_eq!(
            negotiate_output(
                Some("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"),
                false,
                None
            )
            .map_err(|e| e.code),
            meta
        );
        assert_eq!(
            negotiate_output(
                Some("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"),
                false,
                None
            )
            .map_err(|e| e.code),
            json
        );
        let e = negotiate_output(Some("application/vnd.kubernetes.protobuf"), false, None).unwrap_err();
        assert_eq!(e.code, 406);
        assert_eq!(e.status["message"], "only the following media types are accepted: application/json");
        let e = negotiate_output(Some("text/html"), true, None).unwrap_err();
        assert_eq!(
            e.status["message"],
            "only the following media types are accepted: application/json;stream=watch"
        );
        let e =
            negotiate_output(Some("application/json;as=Table;v=v1;g=meta.k8s.io"), false, None).unwrap_err();
        assert!(
            e.status["message"]
                .as_str()
                .unwrap()
                .contains("Table output is not supported by kcache-testserver")
        );
        // A lower quality is tried last.
        assert_eq!(
            negotiate_output(Some("application/json;q=0.5, text/html"), false, None).map_err(|e| e.code),
            json
        );
    }

    /// A built-in kind's protobuf is chosen when it comes first; a kind without one (a custom
    /// resource) falls back to JSON, or 406 when JSON is not accepted.
    #[test]
    fn protobuf_negotiation() {
        let cm = MessageType::for_kind("v1", "ConfigMap");
        let both = Some("application/vnd.kubernetes.protobuf, application/json");
        assert_eq!(negotiate_output(both, false, cm).map_err(|e| e.code), Ok(Output::Protobuf(cm.unwrap())));
        assert_eq!(negotiate_output(both, false, None).map_err(|e| e.code), Ok(Output::Json));
        let watch = Some("application/vnd.kubernetes.protobuf;stream=watch");
        assert_eq!(negotiate_output(watch, true, cm).map_err(|e| e.code), Ok(Output::Protobuf(cm.unwrap())));
        assert_eq!(negotiate_output(watch, false, cm).map_err(|e| e.code), Err(406));
        assert_eq!(
            negotiate_output(Some("application/vnd.kubernetes.protobuf"), false, None).map_err(|e| e.code),
            Err(406)
        );
    }

    #[test]
    fn input_media_types() {
        assert!(check_input("").is_ok());
        assert!(check_input("application/json; charset=utf-8").is_ok());
        let e = check_input("application/vnd.kubernetes.protobuf").unwrap_err();
        assert_eq!((e.code, e.status["reason"].as_str()), (415, Some("UnsupportedMediaType")));
        assert_eq!(
            e.status["message"],
            "the body of the request was in an unknown format - accepted media types include: application/json"
        );
    }
}
