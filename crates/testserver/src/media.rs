//! Content negotiation: which request bodies the server decodes (`Content-Type`, 415 otherwise)
//! and which responses it can write (`Accept`, 406 otherwise), with kube-apiserver's messages
//! (apiserver `endpoints/handlers/negotiation`).
//!
//! This server reads JSON only, and writes JSON and, for the reads of built-in kinds (get, list,
//! watch, and their errors), Kubernetes' protobuf (kcache-protobuf's encoder, which writes
//! kube-apiserver's bytes); for the metadata-only reads of any kind
//! (`application/vnd.kubernetes.protobuf;as=PartialObjectMetadata(List);g=meta.k8s.io;v=...`),
//! protobuf `PartialObjectMetadata(List)`, their errors JSON. kube-apiserver also speaks YAML
//! (and CBOR behind a gate): a client that prefers one of them and also accepts JSON gets JSON,
//! as from a server without that serializer; custom resources have no protobuf form, so a client
//! preferring plain protobuf gets JSON for them, as from kube-apiserver. A body in another format gets kube-apiserver's 415 listing
//! what this server does decode, never a misleading JSON parse error.

use kcache_protobuf::MessageType;

use crate::resources::ResourceDef;
use crate::status::ApiError;

/// The media types this server decodes and encodes, in kube-apiserver's order.
pub(crate) const SUPPORTED: &[&str] = &["application/json"];

/// What a response is to hold, as the `Accept` header asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Output {
    /// The objects themselves, as JSON.
    Json,
    /// A conversion to `as=PartialObjectMetadata` (`list: false`) or
    /// `as=PartialObjectMetadataList` (`list: true`) of `api_version` (`meta.k8s.io/v1` or
    /// `meta.k8s.io/v1beta1`): kube's `*_metadata` calls, client-go's `metadata` client.
    Partial {
        /// `PartialObjectMetadataList` was asked for.
        list: bool,
        /// `meta.k8s.io/<v>`.
        api_version: &'static str,
        /// As Kubernetes' protobuf (`application/vnd.kubernetes.protobuf;as=...`, client-go's
        /// metadata client), which kube-apiserver writes for custom resources too: the
        /// meta.k8s.io types have a protobuf form whatever the object's kind.
        protobuf: bool,
    },
    /// The objects as Kubernetes' protobuf: this message (a built-in kind's).
    Protobuf(MessageType),
}

impl Output {
    /// The protobuf message, when the response is protobuf: the object's, or the
    /// `PartialObjectMetadata(List)` asked for.
    pub(crate) fn protobuf(self) -> Option<MessageType> {
        match self {
            Output::Protobuf(ty) => Some(ty),
            Output::Partial { protobuf: true, list, api_version } => MessageType::for_kind(
                api_version,
                if list { "PartialObjectMetadataList" } else { "PartialObjectMetadata" },
            ),
            _ => None,
        }
    }

    /// Whether an error is answered as a protobuf `Status`. Only for a plain protobuf `Accept`:
    /// kube-apiserver negotiates an error's media type without conversions
    /// (`ErrorNegotiated`, `DefaultEndpointRestrictions`), so client-go's metadata client, whose
    /// only clause without `as=` is `application/json`, gets its errors as JSON.
    pub(crate) fn protobuf_errors(self) -> bool {
        matches!(self, Output::Protobuf(_))
    }

    /// The `PartialObjectMetadata` apiVersion to write objects in, for a conversion that
    /// applies to one object (`list` false); `Err` for `PartialObjectMetadataList`, which
    /// kube-apiserver cannot make of one object (`asPartialObjectMetadataList`).
    pub(crate) fn partial_object(self) -> Result<Option<&'static str>, ()> {
        match self {
            Output::Json | Output::Protobuf(_) => Ok(None),
            Output::Partial { list: false, api_version, .. } => Ok(Some(api_version)),
            Output::Partial { list: true, .. } => Err(()),
        }
    }
}

/// The Go type kube-apiserver holds an object of `def` in, as its conversion errors name it
/// (`%T`): the internal type of a built-in (`*core.ConfigMap`; events.k8s.io's Events are
/// `core.Event`s), `*unstructured.Unstructured` for a custom resource; `List` appended for a list.
fn internal_type(def: &ResourceDef, list: bool) -> String {
    let suffix = if list { "List" } else { "" };
    if def.is_custom() {
        return format!("*unstructured.Unstructured{suffix}");
    }
    let package = match def.group.as_str() {
        "" | "events.k8s.io" => "core",
        "rbac.authorization.k8s.io" => "rbac",
        g => g.split('.').next().unwrap_or(g),
    };
    format!("*{package}.{}{suffix}", def.kind)
}

/// The error of asking for `PartialObjectMetadata` of a list (`asPartialObjectMetadata`: 406).
pub(crate) fn partial_object_of_a_list(def: &ResourceDef) -> ApiError {
    ApiError::new(
        406,
        "NotAcceptable",
        format!(
            "you requested PartialObjectMetadata, but the requested object is a list ({})",
            internal_type(def, true)
        ),
        None,
    )
}

/// The error of asking for `PartialObjectMetadataList` of one object
/// (`asPartialObjectMetadataList`): a 406 for a built-in; for a custom resource, whose
/// `*unstructured.Unstructured` passes the handler's list check, `meta.EachListItem`'s plain
/// error, which kube-apiserver answers as a 500 without a reason.
pub(crate) fn partial_list_of_an_object(def: &ResourceDef) -> ApiError {
    if def.is_custom() {
        let mut e = ApiError::new(500, "", "content is not a list", None);
        if let Some(m) = e.status.as_object_mut() {
            m.remove("reason");
        }
        return e;
    }
    ApiError::new(
        406,
        "NotAcceptable",
        format!(
            "you requested PartialObjectMetadataList, but the requested object is not a list ({})",
            internal_type(def, false)
        ),
        None,
    )
}

/// go-restful's `Route.matchesAccept`, which kube-apiserver's router checks for a built-in
/// resource before its handler negotiates: whether any clause's media type, parameters cut off,
/// is `*/*` or exactly one of the types the route produces. Parameters such as `as=...` are
/// never looked at here, so `application/json;as=Foo` passes the router and fails in the
/// handler (`NegotiateOutputMediaType`) with the handler's message.
pub(crate) fn restful_accepts(accept: Option<&str>) -> bool {
    /// What kube-apiserver v1.36.3's built-in routes produce.
    const PRODUCES: &[&str] =
        &["application/json", "application/yaml", "application/vnd.kubernetes.protobuf"];
    let accept = accept.unwrap_or_default();
    if accept.is_empty() {
        return true;
    }
    accept.split(',').any(|clause| {
        let media = clause.split(';').next().unwrap_or_default().trim();
        media == "*/*" || PRODUCES.contains(&media)
    })
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

/// `NegotiateOutputMediaType`: the first clause, in preference order, that this server can
/// write. A conversion (`as`, `g`, `v`) is allowed only to `PartialObjectMetadata` or
/// `PartialObjectMetadataList` of meta.k8s.io `v1` or `v1beta1` (the endpoints'
/// `AllowsMediaTypeTransform`; `Table` too there, which this server does not make); a clause
/// asking for any other (`v=v2`, `g=apps`, no `g`, `as=Table`) is skipped, so kubectl's
/// `as=Table, application/json` list gets JSON. A watch is negotiated the same way first (its
/// list handler does so before the stream serializer), so its 406 lists the same types.
///
/// # Errors
///
/// 406 NotAcceptable with kube-apiserver's message when no clause fits.
/// `protobuf` is the message of the resource's kind when it has one (a built-in kind, for get,
/// list and watch): a clause asking for `application/vnd.kubernetes.protobuf` then gets it.
/// `partial_protobuf` (get, list and watch of any kind) lets a protobuf clause asking for
/// `PartialObjectMetadata(List)` have it as protobuf, as kube-apiserver's meta.k8s.io codecs
/// write it for built-ins and custom resources alike.
pub(crate) fn negotiate_output(
    accept: Option<&str>,
    watch: bool,
    protobuf: Option<MessageType>,
    partial_protobuf: bool,
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
        let as_protobuf = clause.ty == "application" && clause.sub == "vnd.kubernetes.protobuf";
        let type_ok =
            matches!((clause.ty.as_str(), clause.sub.as_str()), ("application", "json" | "*") | ("*", "*"))
                || (as_protobuf && partial_protobuf);
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
                (
                    as_kind @ ("PartialObjectMetadata" | "PartialObjectMetadataList"),
                    "meta.k8s.io",
                    v @ ("v1" | "v1beta1"),
                ) => {
                    let api_version = if v == "v1" { "meta.k8s.io/v1" } else { "meta.k8s.io/v1beta1" };
                    output = Output::Partial {
                        list: as_kind == "PartialObjectMetadataList",
                        api_version,
                        protobuf: as_protobuf,
                    };
                }
                ("Table", "meta.k8s.io", "v1" | "v1beta1") => {
                    // kube-apiserver makes Tables in JSON and YAML only.
                    table_asked |= !as_protobuf;
                    ok = false;
                }
                _ => ok = false,
            }
        }
        // Protobuf without a conversion is the kind's own message, taken above or not at all.
        if ok && !(as_protobuf && output == Output::Json) {
            return Ok(output);
        }
    }
    let mut message = format!("only the following media types are accepted: {}", SUPPORTED.join(", "));
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

    /// `NegotiateOutputMediaType` with the endpoints' `AllowsMediaTypeTransform`: a conversion
    /// only to PartialObjectMetadata(List) of meta.k8s.io v1 or v1beta1.
    #[test]
    fn accept_negotiation() {
        let json = Ok(Output::Json);
        let list = |v| Ok(Output::Partial { list: true, api_version: v, protobuf: false });
        let object = |v| Ok(Output::Partial { list: false, api_version: v, protobuf: false });
        let n = |a: &str| negotiate_output(Some(a), false, None, false).map_err(|e| e.code);
        assert_eq!(negotiate_output(None, false, None, false).map_err(|e| e.code), json);
        assert_eq!(n("*/*"), json);
        assert_eq!(n("application/json"), json);
        assert_eq!(n("application/vnd.kubernetes.protobuf, application/json"), json);
        assert_eq!(
            n("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"),
            list("meta.k8s.io/v1")
        );
        assert_eq!(
            n("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1beta1"),
            object("meta.k8s.io/v1beta1")
        );
        // client-go's metadata client: protobuf first, which this server skips.
        assert_eq!(
            n(
                "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
            ),
            list("meta.k8s.io/v1")
        );
        for bad in [
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v2",
            "application/json;as=PartialObjectMetadataList;v=v1",
            "application/json;as=PartialObjectMetadataList;g=apps;v=v1",
            "application/json;as=Gizmo;g=meta.k8s.io;v=v1",
        ] {
            let e = negotiate_output(Some(bad), false, None, false).unwrap_err();
            assert_eq!(e.code, 406, "{bad}");
            assert_eq!(e.status["message"], "only the following media types are accepted: application/json");
        }
        assert_eq!(n("application/json;as=Gizmo;g=meta.k8s.io;v=v1, application/json"), json);
        assert_eq!(
            n(
                "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
            ),
            json
        );
        let e =
            negotiate_output(Some("application/vnd.kubernetes.protobuf"), false, None, false).unwrap_err();
        assert_eq!(e.code, 406);
        assert_eq!(e.status["message"], "only the following media types are accepted: application/json");
        let e = negotiate_output(Some("application/json;as=Table;v=v1;g=meta.k8s.io"), false, None, false)
            .unwrap_err();
        assert!(
            e.status["message"]
                .as_str()
                .unwrap()
                .contains("Table output is not supported by kcache-testserver")
        );
        // A lower quality is tried last.
        assert_eq!(n("application/json;q=0.5, text/html"), json);
    }

    /// go-restful's `matchesAccept`: media types only, parameters cut off.
    #[test]
    fn router_accepts_by_media_type_only() {
        assert!(restful_accepts(None));
        assert!(restful_accepts(Some("application/json;as=Gizmo")));
        assert!(restful_accepts(Some("text/html, */*")));
        assert!(!restful_accepts(Some("text/html")));
        assert!(!restful_accepts(Some("application/cbor;as=PartialObjectMetadata")));
    }

    /// A built-in kind's protobuf is chosen when it comes first; a kind without one (a custom
    /// resource) falls back to JSON, or 406 when JSON is not accepted.
    #[test]
    fn protobuf_negotiation() {
        let cm = MessageType::for_kind("v1", "ConfigMap");
        let both = Some("application/vnd.kubernetes.protobuf, application/json");
        assert_eq!(
            negotiate_output(both, false, cm, false).map_err(|e| e.code),
            Ok(Output::Protobuf(cm.unwrap()))
        );
        assert_eq!(negotiate_output(both, false, None, false).map_err(|e| e.code), Ok(Output::Json));
        let watch = Some("application/vnd.kubernetes.protobuf;stream=watch");
        assert_eq!(
            negotiate_output(watch, true, cm, false).map_err(|e| e.code),
            Ok(Output::Protobuf(cm.unwrap()))
        );
        assert_eq!(negotiate_output(watch, false, cm, false).map_err(|e| e.code), Err(406));
        assert_eq!(
            negotiate_output(Some("application/vnd.kubernetes.protobuf"), false, None, false)
                .map_err(|e| e.code),
            Err(406)
        );
    }

    /// client-go's metadata client (`k8s.io/client-go/metadata`): its protobuf clause asks for
    /// `PartialObjectMetadata(List)` as protobuf, which kube-apiserver answers for built-ins and
    /// custom resources alike; without protobuf serving the JSON clause after it is taken.
    #[test]
    fn partial_object_metadata_as_protobuf() {
        let client_go = |as_kind: &str| {
            format!(
                "application/vnd.kubernetes.protobuf;as={as_kind};g=meta.k8s.io;v=v1,application/json;as={as_kind};g=meta.k8s.io;v=v1,application/json"
            )
        };
        let n = |a: &str, watch, partial_protobuf| {
            negotiate_output(Some(a), watch, None, partial_protobuf).map_err(|e| e.code)
        };
        let pb = |list, api_version| Ok(Output::Partial { list, api_version, protobuf: true });
        let json = |list, api_version| Ok(Output::Partial { list, api_version, protobuf: false });
        let list = client_go("PartialObjectMetadataList");
        assert_eq!(n(&list, false, true), pb(true, "meta.k8s.io/v1"));
        assert_eq!(n(&list, false, false), json(true, "meta.k8s.io/v1"));
        assert_eq!(n(&client_go("PartialObjectMetadata"), true, true), pb(false, "meta.k8s.io/v1"));
        assert_eq!(
            n(
                "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1beta1",
                false,
                true
            ),
            pb(true, "meta.k8s.io/v1beta1")
        );
        // Plain protobuf is still the kind's own message only; Tables are never protobuf.
        assert_eq!(n("application/vnd.kubernetes.protobuf, application/json", false, true), Ok(Output::Json));
        let e = negotiate_output(
            Some("application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1"),
            false,
            None,
            true,
        )
        .unwrap_err();
        assert_eq!(e.status["message"], "only the following media types are accepted: application/json");
        // The messages, and errors as JSON (kube-apiserver negotiates them without conversions).
        let out = pb(true, "meta.k8s.io/v1beta1").unwrap();
        assert_eq!(
            out.protobuf().map(MessageType::name),
            Some("apis/meta/v1beta1.PartialObjectMetadataList")
        );
        assert!(!out.protobuf_errors());
        assert!(Output::Protobuf(MessageType::status()).protobuf_errors());
        assert_eq!(json(false, "meta.k8s.io/v1").unwrap().protobuf(), None);
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
