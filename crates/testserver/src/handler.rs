//! Request routing and the non-watch verbs: get, list, create, update, patch, delete, and
//! discovery.

use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::faults::{FaultBody, RequestFault, Verb};
use crate::log::RequestRecord;
use crate::resources::ResourceDef;
use crate::selector::{FieldSelector, LabelSelector};
use crate::server::{ResBody, Shared};
use crate::status::ApiError;
use crate::store::{Key, ResourceId, Store, StoredObject};
use crate::util::{b64_decode, b64_encode, new_uid, parse_bool, parse_query, random_suffix, rfc3339_now};

/// A routed resource request.
#[derive(Debug)]
pub(crate) struct Route {
    /// Which resource.
    pub(crate) res: ResourceId,
    /// Its definition (a copy, taken at routing time).
    pub(crate) def: ResourceDef,
    /// Namespace from the path.
    pub(crate) namespace: Option<String>,
    /// Object name from the path.
    pub(crate) name: Option<String>,
    /// The request is for the `status` subresource.
    pub(crate) status: bool,
}

/// Decoded query parameters.
#[derive(Debug, Default)]
pub(crate) struct Query {
    pairs: Vec<(String, String)>,
}

impl Query {
    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// A boolean parameter, parsed as Go's `strconv.ParseBool` (invalid values are an error).
    pub(crate) fn flag(&self, key: &str) -> Result<Option<bool>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => parse_bool(v).map(Some).ok_or_else(|| {
                ApiError::bad_request(format!("{key}: strconv.ParseBool: parsing {v:?}: invalid syntax"))
            }),
        }
    }
}

/// A finished response plus what to log.
fn respond(code: u16, body: Bytes, retry_after: Option<u64>) -> Response<ResBody> {
    respond_as(code, "application/json", body, retry_after)
}

/// A whole response with this content type; plain text also gets `nosniff`, as Go's `http.Error`
/// sends it.
fn respond_as(code: u16, content_type: &str, body: Bytes, retry_after: Option<u64>) -> Response<ResBody> {
    let mut b = Response::builder()
        .status(StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header(header::CONTENT_TYPE, content_type)
        .header("audit-id", "kcache-testserver");
    if content_type.starts_with("text/plain") {
        b = b.header(header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    }
    if let Some(secs) = retry_after {
        b = b.header(header::RETRY_AFTER, secs.to_string());
    }
    b.body(ResBody::Full(Some(body))).unwrap_or_else(|_| Response::new(ResBody::Full(None)))
}

pub(crate) fn error_response(e: &ApiError) -> Response<ResBody> {
    respond(e.code, Bytes::from(e.body()), e.retry_after)
}

/// A fault answered as Go's `http.Error` writes: the message and a newline as plain text.
fn plain_text_response(fault: &RequestFault) -> Response<ResBody> {
    let body = Bytes::from(format!("{}\n", fault.message));
    respond_as(fault.http_code.unwrap_or(fault.code), "text/plain; charset=utf-8", body, fault.retry_after)
}

fn json_response(code: u16, v: &Value) -> Response<ResBody> {
    respond(code, Bytes::from(serde_json::to_vec(v).unwrap_or_default()), None)
}

/// Entry point for every request.
pub(crate) async fn handle(
    shared: Arc<Shared>,
    generation: CancellationToken,
    connection: u64,
    req: Request<Incoming>,
) -> Response<ResBody> {
    let at = tokio::time::Instant::now();
    let time = SystemTime::now();
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let raw_query = req.uri().query().unwrap_or_default().to_string();
    let query = Query { pairs: parse_query(&raw_query) };
    let route = route(&shared, &path);
    // An unparsable `watch` is a 400 like any undecodable query parameter.
    let (watch, bad_watch) = match query.flag("watch") {
        Ok(w) => (method == Method::GET && matches!(&route, Ok(Some(_))) && w.unwrap_or(false), None),
        Err(e) => (false, Some(e)),
    };
    let verb = classify(&method, &route, watch);

    // Authentication and authorization come first, as in kube-apiserver's filter chain: a
    // denied request is not served, does not consume injected faults, and gets 401/403 even
    // for paths that do not exist.
    let auth = crate::auth::check(&shared, req.headers(), &method, &path, &query);
    let user = auth.as_ref().ok().and_then(|u| u.as_ref().map(|u| u.name.clone()));
    let fault = if auth.is_ok() { shared.faults.lock().take_request_fault(verb, &path) } else { None };
    let response = if let Err(e) = &auth {
        error_response(e)
    } else if let Some(fault) = fault {
        match fault.body {
            FaultBody::Status => error_response(&fault_error(&fault, verb, &route, user.as_deref())),
            FaultBody::PlainText => plain_text_response(&fault),
        }
    } else if let Some(e) = bad_watch {
        error_response(&e)
    } else {
        match route {
            Err(e) => error_response(&e),
            Ok(None) => discovery(&shared, &method, &path),
            Ok(Some(route)) => match serve(&shared, generation, req, route, verb, &query).await {
                Ok(r) => r,
                Err(e) => error_response(&e),
            },
        }
    };
    tracing::debug!(%method, %path, query = %raw_query, status = response.status().as_u16(), watch, "kcache-testserver");
    shared.log.lock().push(RequestRecord {
        method,
        path,
        query: raw_query,
        verb,
        watch,
        connection,
        status: response.status().as_u16(),
        user,
        at,
        time,
    });
    response
}

fn classify(method: &Method, route: &Result<Option<Route>, ApiError>, watch: bool) -> Verb {
    let Ok(Some(route)) = route else { return Verb::Other };
    let named = route.name.is_some();
    match *method {
        Method::GET if watch => Verb::Watch,
        Method::GET if named => Verb::Get,
        Method::GET => Verb::List,
        Method::POST => Verb::Create,
        Method::PUT => Verb::Update,
        Method::PATCH => Verb::Patch,
        Method::DELETE if named => Verb::Delete,
        Method::DELETE => Verb::DeleteCollection,
        _ => Verb::Other,
    }
}

fn fault_error(
    fault: &RequestFault,
    verb: Verb,
    route: &Result<Option<Route>, ApiError>,
    user: Option<&str>,
) -> ApiError {
    let mut message = fault.message.clone();
    let user = user.unwrap_or("system:anonymous");
    if fault.code == 403 && message.is_empty() {
        message = match route {
            Ok(Some(r)) => {
                let mut m = format!(
                    "{} is forbidden: User {user:?} cannot {} resource \"{}\" in API group \"{}\"",
                    r.def.qualified_resource(),
                    verb.as_str(),
                    r.def.resource,
                    r.def.group
                );
                match &r.namespace {
                    Some(ns) => m.push_str(&format!(" in the namespace \"{ns}\"")),
                    None => m.push_str(" at the cluster scope"),
                }
                m
            }
            _ => format!("forbidden: User {user:?} cannot get path"),
        };
    }
    let details = fault.retry_after.map(|s| json!({"retryAfterSeconds": s}));
    let mut e = ApiError::new(fault.code, &fault.reason, message, details);
    e.retry_after = fault.retry_after;
    if let Some(http_code) = fault.http_code {
        e.code = http_code;
    }
    e
}

/// Routes a path: `Ok(None)` for discovery and other non-resource paths.
fn route(shared: &Shared, path: &str) -> Result<Option<Route>, ApiError> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').filter(|s| !s.is_empty()).collect();
    let (group, version, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] if !rest.is_empty() => ("", *v, rest),
        ["apis", g, v, rest @ ..] if !rest.is_empty() => (*g, *v, rest),
        _ => return Ok(None),
    };
    let (namespace, resource, name, status) = match rest {
        [r] => (None, *r, None, false),
        [r, n] => (None, *r, Some(*n), false),
        // Also `/api/v1/namespaces/<name>/status`: the status of a namespace, as upstream.
        [r, n, "status"] => (None, *r, Some(*n), true),
        ["namespaces", ns, r] => (Some(*ns), *r, None, false),
        ["namespaces", ns, r, n] => (Some(*ns), *r, Some(*n), false),
        ["namespaces", ns, r, n, "status"] => (Some(*ns), *r, Some(*n), true),
        _ => return Err(ApiError::path_not_found()),
    };
    let store = shared.store.lock();
    let res = store.lookup(group, version, resource).ok_or_else(ApiError::path_not_found)?;
    let def = store.resources[res].def.clone();
    drop(store);
    if namespace.is_some() && !def.namespaced {
        return Err(ApiError::path_not_found());
    }
    if def.namespaced && namespace.is_none() && name.is_some() {
        return Err(ApiError::path_not_found());
    }
    if status && !def.status_subresource {
        return Err(ApiError::path_not_found());
    }
    Ok(Some(Route {
        res,
        def,
        namespace: namespace.map(str::to_string),
        name: name.map(str::to_string),
        status,
    }))
}

async fn serve(
    shared: &Arc<Shared>,
    generation: CancellationToken,
    req: Request<Incoming>,
    route: Route,
    verb: Verb,
    query: &Query,
) -> Result<Response<ResBody>, ApiError> {
    let content_type =
        req.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    // `kube::Api::*_metadata` asks for PartialObjectMetadata(List) through Accept.
    let meta_only = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("as=PartialObjectMetadata"));
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return Err(ApiError::bad_request(format!("unable to read request body: {e}"))),
    };
    let dry_run = query.get("dryRun").is_some_and(|v| v == "All");
    if matches!(verb, Verb::Update | Verb::Patch) && route.name.is_none() {
        return Err(ApiError::method_not_allowed());
    }
    if route.status && !matches!(verb, Verb::Get | Verb::Update | Verb::Patch) {
        return Err(ApiError::method_not_allowed());
    }
    match verb {
        Verb::Get => get(shared, &route, meta_only),
        Verb::List => list(shared, &route, query, meta_only),
        Verb::Watch => crate::watch::watch(shared, generation, &route, query, meta_only),
        Verb::Create => create(shared, &route, &body, dry_run),
        Verb::Update => update(shared, &route, &body, dry_run),
        Verb::Patch => patch(shared, &route, &body, &content_type, dry_run),
        Verb::Delete => delete(shared, &route, &body, dry_run),
        Verb::DeleteCollection => delete_collection(shared, &route, query, dry_run),
        Verb::Other => Err(ApiError::method_not_allowed()),
    }
}

fn object_response(code: u16, obj: &StoredObject) -> Response<ResBody> {
    respond(code, obj.bytes.clone(), None)
}

fn key_of(route: &Route) -> Key {
    (route.namespace.clone().unwrap_or_default(), route.name.clone().unwrap_or_default())
}

fn get(shared: &Shared, route: &Route, meta_only: bool) -> Result<Response<ResBody>, ApiError> {
    let store = shared.store.lock();
    let name = route.name.as_deref().unwrap_or_default();
    let obj = store.get(route.res, &key_of(route)).ok_or_else(|| ApiError::not_found(&route.def, name))?;
    drop(store);
    if meta_only {
        return Ok(respond(200, partial_object_metadata(&obj.bytes), None));
    }
    Ok(object_response(200, &obj))
}

/// The `PartialObjectMetadata` form of an object (metadata only), as kube-apiserver serves it to
/// clients that ask for it in `Accept`.
pub(crate) fn partial_object_metadata(bytes: &[u8]) -> Bytes {
    let v: Value = serde_json::from_slice(bytes).unwrap_or(Value::Null);
    let partial =
        json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": v["metadata"]});
    Bytes::from(serde_json::to_vec(&partial).unwrap_or_default())
}

/// Parses the selectors of a list or watch.
pub(crate) fn selectors(
    query: &Query,
    def: &ResourceDef,
) -> Result<(LabelSelector, FieldSelector), ApiError> {
    Ok((
        LabelSelector::parse(query.get("labelSelector").unwrap_or_default())?,
        FieldSelector::parse(query.get("fieldSelector").unwrap_or_default(), def)?,
    ))
}

/// Parses a resourceVersion parameter as the watch cache does.
pub(crate) fn parse_rv(s: &str) -> Result<u64, ApiError> {
    s.parse::<u64>().map_err(|_| {
        ApiError::bad_request(format!(
            "invalid resource version: strconv.ParseUint: parsing {s:?}: invalid syntax"
        ))
    })
}

/// `field.Forbidden` as a (type, field, body) cause.
pub(crate) fn forbidden(field: &'static str, detail: &str) -> (&'static str, &'static str, String) {
    ("FieldValueForbidden", field, format!("Forbidden: {detail}"))
}

/// The 422 kube-apiserver answers for invalid ListOptions.
pub(crate) fn invalid_list_options(causes: &[(&str, &str, String)]) -> ApiError {
    ApiError::invalid("meta.k8s.io", "ListOptions", "", causes)
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
    b64_encode(token.to_string().as_bytes())
}

/// Decodes a continue token into the resourceVersion to read at (`None`: the current one, for a
/// negative rv) and the key after which to start. Errors are the 400 of
/// storage.ValidateListOptions: "invalid continue token: " and storage.DecodeContinue's error.
fn decode_continue(token: &str) -> Result<(Option<u64>, Key), ApiError> {
    const INVALID: &str = "continue key is not valid";
    let bad = |why: String| ApiError::bad_request(format!("invalid continue token: {why}"));
    let bytes =
        b64_decode(token).map_err(|at| bad(format!("{INVALID}: illegal base64 data at input byte {at}")))?;
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

fn list(
    shared: &Shared,
    route: &Route,
    query: &Query,
    meta_only: bool,
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
        if !filtered || (labels.matches(&o.labels) && fields.matches(o)) {
            selected.push(o.clone());
        }
        if limit > 0 && selected.len() >= limit {
            if i + 1 < items.len() {
                next = Some((o.namespace.clone(), o.name.clone()));
                remaining = items.len() - (i + 1);
            }
            break;
        }
    }
    let mut meta = format!("{{\"resourceVersion\":\"{at}\"");
    if let Some(last) = next {
        meta.push_str(&format!(",\"continue\":\"{}\"", encode_continue(at as i64, &last)));
        if !filtered {
            meta.push_str(&format!(",\"remainingItemCount\":{remaining}"));
        }
    }
    meta.push('}');
    if meta_only {
        let items: Vec<Bytes> = selected.iter().map(|o| partial_object_metadata(&o.bytes)).collect();
        let head = format!(
            "{{\"kind\":\"PartialObjectMetadataList\",\"apiVersion\":\"meta.k8s.io/v1\",\"metadata\":{meta},\"items\":["
        );
        return Ok(respond(200, join_list(&head, items.iter().map(|b| &b[..])), None));
    }
    Ok(respond(200, list_body(&route.def, &meta, &selected), None))
}

/// `{"kind":"<Kind>List",...,"items":[...]}` built from the stored bytes.
fn list_body(def: &ResourceDef, meta: &str, items: &[Arc<StoredObject>]) -> Bytes {
    let head = format!(
        "{{\"kind\":\"{}\",\"apiVersion\":\"{}\",\"metadata\":{meta},\"items\":[",
        def.list_kind,
        def.api_version()
    );
    join_list(&head, items.iter().map(|o| &o.bytes[..]))
}

/// `head`, then the items separated by commas, then `]}`.
fn join_list<'a>(head: &str, items: impl Iterator<Item = &'a [u8]> + Clone) -> Bytes {
    let size: usize = items.clone().map(|b| b.len() + 1).sum();
    let mut out = Vec::with_capacity(size + head.len() + 2);
    out.extend_from_slice(head.as_bytes());
    for (i, b) in items.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b);
    }
    out.extend_from_slice(b"]}");
    Bytes::from(out)
}

/// Decodes a request body into a JSON object with the checks the create/update handlers make.
fn decode_body(def: &ResourceDef, body: &[u8]) -> Result<Map<String, Value>, ApiError> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        let summary: String = String::from_utf8_lossy(&body[..body.len().min(30)]).into_owned();
        ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {}): couldn't get version/kind; json parse error: {e} ({summary})",
            def.kind
        ))
    })?;
    let Value::Object(mut obj) = value else {
        return Err(ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {}): couldn't get version/kind; json parse error: expected an object",
            def.kind
        )));
    };
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or_default().to_string();
    if !api_version.is_empty() && api_version != def.api_version() {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({api_version}) does not match the expected API version ({})",
            def.api_version()
        )));
    }
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default().to_string();
    if !kind.is_empty() && kind != def.kind {
        let name =
            obj.get("metadata").and_then(|m| m.get("name")).and_then(Value::as_str).unwrap_or_default();
        if def.group.is_empty() {
            return Err(ApiError::bad_request(format!(
                "{kind} in version {:?} cannot be handled as a {}: the kind in the data ({kind}) does not match the expected kind ({})",
                def.version, def.kind, def.kind
            )));
        }
        return Err(ApiError::invalid(
            &def.group,
            &kind,
            name,
            &[("FieldValueInvalid", "kind", format!("Invalid value: {kind:?}: must be {}", def.kind))],
        ));
    }
    obj.insert("apiVersion".into(), Value::String(def.api_version()));
    obj.insert("kind".into(), Value::String(def.kind.clone()));
    match obj.get("metadata") {
        None | Some(Value::Null) => {
            obj.insert("metadata".into(), Value::Object(Map::new()));
        }
        Some(Value::Object(meta)) => check_meta_types(def, meta)?,
        Some(_) => {
            return Err(ApiError::bad_request(format!(
                "{} in version {:?} cannot be handled as a {}: json: cannot unmarshal into Go struct field {}.metadata of type v1.ObjectMeta",
                def.kind, def.version, def.kind, def.kind
            )));
        }
    }
    Ok(obj)
}

/// The JSON types `metav1.ObjectMeta` accepts for the fields clients set; anything else fails
/// decoding in kube-apiserver with a 400.
fn check_meta_types(def: &ResourceDef, meta: &Map<String, Value>) -> Result<(), ApiError> {
    let bad = |field: &str, want: &str| {
        Err(ApiError::bad_request(format!(
            "{kind} in version {:?} cannot be handled as a {kind}: json: cannot unmarshal into Go struct field \
             ObjectMeta.metadata.{field} of type {want}",
            def.version,
            kind = def.kind
        )))
    };
    for field in [
        "name",
        "namespace",
        "generateName",
        "resourceVersion",
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
    ] {
        if meta.get(field).is_some_and(|v| !v.is_string() && !v.is_null()) {
            return bad(field, "string");
        }
    }
    for field in ["labels", "annotations"] {
        match meta.get(field) {
            None | Some(Value::Null) => {}
            Some(Value::Object(m)) if m.values().all(Value::is_string) => {}
            Some(_) => return bad(field, "map[string]string"),
        }
    }
    match meta.get("finalizers") {
        None | Some(Value::Null) => {}
        Some(Value::Array(a)) if a.iter().all(Value::is_string) => {}
        Some(_) => return bad("finalizers", "[]string"),
    }
    if meta.get("generation").is_some_and(|v| !v.is_i64() && !v.is_null()) {
        return bad("generation", "int64");
    }
    Ok(())
}

fn meta_str<'a>(obj: &'a Map<String, Value>, field: &str) -> &'a str {
    obj.get("metadata").and_then(|m| m.get(field)).and_then(Value::as_str).unwrap_or_default()
}

fn meta_mut(obj: &mut Map<String, Value>) -> &mut Map<String, Value> {
    if !matches!(obj.get("metadata"), Some(Value::Object(_))) {
        obj.insert("metadata".into(), Value::Object(Map::new()));
    }
    match obj.get_mut("metadata") {
        Some(Value::Object(m)) => m,
        _ => unreachable!("metadata was just made an object"),
    }
}

/// RFC 1123 subdomain, as object names must be.
fn name_errors(name: &str) -> Option<String> {
    let ok = name.len() <= 253
        && name.split('.').all(|part| {
            !part.is_empty()
                && part.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        });
    (!ok).then(|| {
        format!(
            "Invalid value: {name:?}: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric \
             characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', \
             regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        )
    })
}

/// Checks the namespace in the body against the path, filling it in when empty.
fn check_namespace(route: &Route, obj: &mut Map<String, Value>) -> Result<(), ApiError> {
    let meta = meta_mut(obj);
    if route.def.namespaced {
        let ns = route.namespace.clone().unwrap_or_default();
        match meta.get("namespace").and_then(Value::as_str) {
            Some(body_ns) if !body_ns.is_empty() && body_ns != ns => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            _ => {
                meta.insert("namespace".into(), Value::String(ns));
            }
        }
    } else {
        meta.remove("namespace");
    }
    Ok(())
}

fn commit(shared: &Shared, store: parking_lot::MutexGuard<'_, Store>, rv: u64) {
    drop(store);
    shared.notify(rv);
}

fn create(shared: &Shared, route: &Route, body: &[u8], dry_run: bool) -> Result<Response<ResBody>, ApiError> {
    if route.name.is_some() {
        return Err(ApiError::method_not_allowed());
    }
    if route.def.namespaced && route.namespace.is_none() {
        return Err(ApiError::path_not_found());
    }
    let mut obj = decode_body(&route.def, body)?;
    check_namespace(route, &mut obj)?;
    let meta = meta_mut(&mut obj);
    let mut name = meta.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
    if name.is_empty()
        && let Some(prefix) = meta.get("generateName").and_then(Value::as_str).filter(|p| !p.is_empty())
    {
        name = format!("{prefix}{}", random_suffix());
        meta.insert("name".into(), Value::String(name.clone()));
    }
    if name.is_empty() {
        return Err(ApiError::invalid(
            &route.def.group,
            &route.def.kind,
            "",
            &[(
                "FieldValueRequired",
                "metadata.name",
                "Required value: name or generateName is required".into(),
            )],
        ));
    }
    if let Some(why) = name_errors(&name) {
        return Err(ApiError::invalid(
            &route.def.group,
            &route.def.kind,
            &name,
            &[("FieldValueInvalid", "metadata.name", why)],
        ));
    }
    meta.insert("uid".into(), Value::String(new_uid()));
    meta.insert("creationTimestamp".into(), Value::String(rfc3339_now()));
    meta.remove("resourceVersion");
    meta.remove("deletionTimestamp");
    meta.remove("deletionGracePeriodSeconds");
    if route.def.has_generation {
        meta.insert("generation".into(), Value::from(1));
    } else {
        meta.remove("generation");
    }
    let ns = meta.get("namespace").and_then(Value::as_str).unwrap_or_default().to_string();
    if route.def.status_subresource {
        // The registries' PrepareForCreate: status is not the client's to set.
        obj.remove("status");
        match route.def.resource.as_str() {
            "pods" if route.def.group.is_empty() => {
                obj.insert("status".into(), json!({"phase": "Pending"}));
            }
            "namespaces" if route.def.group.is_empty() => {
                obj.insert("status".into(), json!({"phase": "Active"}));
            }
            _ => {}
        }
    }
    if route.def.is_crd() {
        crate::crd::prepare_create(&name, &mut obj)?;
    }
    let mut store = shared.store.lock();
    if !store.resources[route.res].served {
        // A CRD deleted since this request was routed.
        return Err(ApiError::path_not_found());
    }
    if shared.strict_namespaces && route.def.namespaced {
        let namespaces = store.lookup("", "v1", "namespaces");
        if namespaces.is_some_and(|n| store.get(n, &(String::new(), ns.clone())).is_none()) {
            let def = namespaces.map(|n| store.resources[n].def.clone()).unwrap_or_else(|| route.def.clone());
            return Err(ApiError::not_found(&def, &ns));
        }
    }
    if store.get(route.res, &(ns, name.clone())).is_some() {
        return Err(ApiError::already_exists(&route.def, &name));
    }
    if dry_run {
        return Ok(json_response(201, &Value::Object(obj)));
    }
    let stored = store.put(route.res, Value::Object(obj));
    if route.def.is_crd() {
        crate::crd::sync(&mut store, route.res, &stored.value(), None);
    }
    let rv = store.rv;
    commit(shared, store, rv);
    Ok(object_response(201, &stored))
}

/// Server-owned fields carried over from the stored object, generation bumped on spec changes,
/// and a no-op write detected. Returns `None` when nothing changed.
fn finish_update(route: &Route, old: &Value, mut new: Map<String, Value>) -> Option<Value> {
    let def = &route.def;
    if route.status {
        // A status write changes only `.status` (the CRD status strategy's PrepareForUpdate).
        let mut kept = old.as_object().cloned().unwrap_or_default();
        match new.remove("status") {
            Some(s) => kept.insert("status".into(), s),
            None => kept.remove("status"),
        };
        new = kept;
    } else if def.status_subresource {
        // With a status subresource, writes to the object keep the stored status.
        match old.get("status") {
            Some(s) => new.insert("status".into(), s.clone()),
            None => new.remove("status"),
        };
    }
    let old_meta = &old["metadata"];
    let meta = meta_mut(&mut new);
    for field in ["uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"]
    {
        match old_meta.get(field) {
            Some(v) => meta.insert(field.into(), v.clone()),
            None => meta.remove(field),
        };
    }
    meta.insert("resourceVersion".into(), old_meta["resourceVersion"].clone());
    let new = Value::Object(new);
    if &new == old {
        return None;
    }
    let mut new = new;
    if def.has_generation {
        let spec_changed = new
            .as_object()
            .into_iter()
            .flatten()
            .chain(old.as_object().into_iter().flatten())
            .any(|(k, _)| k != "metadata" && k != "status" && new.get(k) != old.get(k));
        if spec_changed {
            let g = old_meta["generation"].as_i64().unwrap_or(0) + 1;
            new["metadata"]["generation"] = Value::from(g);
        }
    }
    Some(new)
}

/// Stores an updated object, finishing a pending deletion once its finalizers are gone.
fn store_update(
    shared: &Shared,
    mut store: parking_lot::MutexGuard<'_, Store>,
    route: &Route,
    old: &Value,
    new: Value,
) -> Response<ResBody> {
    let finalizers_left = new["metadata"]["finalizers"].as_array().is_some_and(|f| !f.is_empty());
    if new["metadata"].get("deletionTimestamp").is_some() && !finalizers_left {
        let key = key_of(route);
        if route.def.is_crd() {
            crate::crd::remove(&mut store, old);
        }
        store.put(route.res, new);
        let last = store.remove(route.res, &key);
        let rv = store.rv;
        commit(shared, store, rv);
        return match last {
            Some(o) => object_response(200, &o),
            None => error_response(&ApiError::not_found(&route.def, &key.1)),
        };
    }
    let stored = store.put(route.res, new);
    if route.def.is_crd() && !route.status {
        crate::crd::sync(&mut store, route.res, &stored.value(), Some(old));
    }
    let rv = store.rv;
    commit(shared, store, rv);
    object_response(200, &stored)
}

fn update(shared: &Shared, route: &Route, body: &[u8], dry_run: bool) -> Result<Response<ResBody>, ApiError> {
    let name = route.name.clone().unwrap_or_default();
    let mut obj = decode_body(&route.def, body)?;
    let body_name = meta_str(&obj, "name").to_string();
    if body_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    check_namespace(route, &mut obj)?;
    let body_rv = meta_str(&obj, "resourceVersion").to_string();
    let store = shared.store.lock();
    let old = store.get(route.res, &key_of(route)).ok_or_else(|| ApiError::not_found(&route.def, &name))?;
    if body_rv.is_empty() {
        if !route.def.allow_unconditional_update {
            return Err(ApiError::invalid(
                &route.def.group,
                &route.def.kind,
                &name,
                &[(
                    "FieldValueInvalid",
                    "metadata.resourceVersion",
                    "Invalid value: 0: must be specified for an update".into(),
                )],
            ));
        }
    } else if body_rv != old.rv.to_string() {
        return Err(ApiError::conflict(&route.def, &name, ApiError::MODIFIED));
    }
    let old_value = old.value();
    if route.def.is_crd() && !route.status {
        crate::crd::default(&mut obj);
    }
    let Some(new) = finish_update(route, &old_value, obj) else {
        return Ok(object_response(200, &old));
    };
    if route.def.is_crd() && !route.status {
        crate::crd::validate_update(&old_value, &new)?;
    }
    if dry_run {
        return Ok(json_response(200, &new));
    }
    Ok(store_update(shared, store, route, &old_value, new))
}

/// RFC 7386 JSON merge patch.
fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(t) = target {
        for (k, v) in p {
            if v.is_null() {
                t.remove(k);
            } else {
                merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    }
}

fn patch(
    shared: &Shared,
    route: &Route,
    body: &[u8],
    content_type: &str,
    dry_run: bool,
) -> Result<Response<ResBody>, ApiError> {
    let media = content_type.split(';').next().unwrap_or_default().trim();
    let json_patch = media == "application/json-patch+json";
    if !json_patch
        && media != "application/merge-patch+json"
        && media != "application/strategic-merge-patch+json"
    {
        return Err(ApiError::unsupported_patch());
    }
    let name = route.name.clone().unwrap_or_default();
    let patch: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
    if json_patch && !patch.is_array() {
        return Err(ApiError::bad_request(
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch",
        ));
    }
    if !json_patch && !patch.is_object() {
        return Err(ApiError::bad_request("error decoding patch: the patch is not a JSON object"));
    }
    let store = shared.store.lock();
    let old = store.get(route.res, &key_of(route)).ok_or_else(|| ApiError::not_found(&route.def, &name))?;
    let old_value = old.value();
    let mut patched = old_value.clone();
    if json_patch {
        crate::jsonpatch::apply(&mut patched, &patch).map_err(|e| ApiError::new(422, "Invalid", e, None))?;
    } else {
        merge_patch(&mut patched, &patch);
    }
    let Value::Object(mut obj) = patched else {
        return Err(ApiError::bad_request("error decoding patch: the patched object is not a JSON object"));
    };
    match obj.get("metadata") {
        Some(Value::Object(meta)) => check_meta_types(&route.def, meta)?,
        _ => return Err(ApiError::bad_request("error decoding patch: metadata must be an object")),
    }
    if obj.get("apiVersion") != old_value.get("apiVersion") || obj.get("kind") != old_value.get("kind") {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({}) does not match the expected API version ({})",
            obj.get("apiVersion").and_then(Value::as_str).unwrap_or_default(),
            route.def.api_version()
        )));
    }
    if meta_str(&obj, "name") != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({}) does not match the name on the URL ({name})",
            meta_str(&obj, "name")
        )));
    }
    check_namespace(route, &mut obj)?;
    // A patch that sets a resourceVersion (to anything but the current one) is a precondition.
    let patched_rv = meta_str(&obj, "resourceVersion");
    if !patched_rv.is_empty() && patched_rv != old.rv.to_string() {
        return Err(ApiError::conflict(&route.def, &name, ApiError::MODIFIED));
    }
    if route.def.is_crd() && !route.status {
        crate::crd::default(&mut obj);
    }
    let Some(new) = finish_update(route, &old_value, obj) else {
        return Ok(object_response(200, &old));
    };
    if route.def.is_crd() && !route.status {
        crate::crd::validate_update(&old_value, &new)?;
    }
    if dry_run {
        return Ok(json_response(200, &new));
    }
    Ok(store_update(shared, store, route, &old_value, new))
}

fn success_status(def: &ResourceDef, name: &str, uid: &Value) -> Value {
    let mut details = json!({"name": name, "kind": def.resource, "uid": uid});
    if !def.group.is_empty() {
        details["group"] = json!(def.group);
    }
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details})
}

fn delete(shared: &Shared, route: &Route, body: &[u8], dry_run: bool) -> Result<Response<ResBody>, ApiError> {
    let name = route.name.clone().unwrap_or_default();
    let opts: Value = if body.iter().all(u8::is_ascii_whitespace) {
        Value::Null
    } else {
        serde_json::from_slice(body).map_err(|e| {
            ApiError::bad_request(format!(
                "the object provided is unrecognized (must be of type DeleteOptions): {e}"
            ))
        })?
    };
    let mut store = shared.store.lock();
    let key = key_of(route);
    let old = store.get(route.res, &key).ok_or_else(|| ApiError::not_found(&route.def, &name))?;
    let mut old_value = old.value();
    let pre = &opts["preconditions"];
    if let Some(uid) = pre["uid"].as_str() {
        let actual = old_value["metadata"]["uid"].as_str().unwrap_or_default();
        if uid != actual {
            return Err(ApiError::conflict(
                &route.def,
                &name,
                &format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {actual}"),
            ));
        }
    }
    if let Some(rv) = pre["resourceVersion"].as_str()
        && rv != old.rv.to_string()
    {
        return Err(ApiError::conflict(
            &route.def,
            &name,
            &format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                old.rv
            ),
        ));
    }
    if dry_run {
        return Ok(object_response(200, &old));
    }
    let has_finalizers = old_value["metadata"]["finalizers"].as_array().is_some_and(|f| !f.is_empty());
    if has_finalizers {
        // Graceful: mark for deletion and wait for the finalizers to be removed by updates.
        if old_value["metadata"].get("deletionTimestamp").is_none() {
            old_value["metadata"]["deletionTimestamp"] = Value::String(rfc3339_now());
            old_value["metadata"]["deletionGracePeriodSeconds"] = Value::from(0);
            let stored = store.put(route.res, old_value);
            commit(shared, store, stored.rv);
            return Ok(object_response(200, &stored));
        }
        return Ok(object_response(200, &old));
    }
    if route.def.is_crd() {
        // The CRD finalizer's work: the custom objects go first, then the CRD.
        crate::crd::remove(&mut store, &old_value);
    }
    let last = store.remove(route.res, &key).ok_or_else(|| ApiError::not_found(&route.def, &name))?;
    commit(shared, store, last.rv);
    if route.def.delete_returns_object {
        Ok(object_response(200, &last))
    } else {
        Ok(json_response(200, &success_status(&route.def, &name, &old_value["metadata"]["uid"])))
    }
}

fn delete_collection(
    shared: &Shared,
    route: &Route,
    query: &Query,
    dry_run: bool,
) -> Result<Response<ResBody>, ApiError> {
    let (labels, fields) = selectors(query, &route.def)?;
    let mut store = shared.store.lock();
    let current = store.rv;
    let items = store
        .list_at(route.res, route.namespace.as_deref(), None, current)
        .map_err(|_| ApiError::expired("The resourceVersion for the provided list is too old."))?;
    let mut deleted = Vec::new();
    for o in items.iter().filter(|o| labels.matches(&o.labels) && fields.matches(o)) {
        if dry_run {
            deleted.push(o.clone());
            continue;
        }
        if route.def.is_crd() {
            crate::crd::remove(&mut store, &o.value());
        }
        if let Some(last) = store.remove(route.res, &(o.namespace.clone(), o.name.clone())) {
            deleted.push(last);
        }
    }
    let rv = store.rv;
    commit(shared, store, rv);
    Ok(respond(200, list_body(&route.def, &format!("{{\"resourceVersion\":\"{rv}\"}}"), &deleted), None))
}

/// Discovery documents and `/version`.
fn discovery(shared: &Shared, method: &Method, path: &str) -> Response<ResBody> {
    if method != Method::GET {
        return error_response(&ApiError::path_not_found());
    }
    let store = shared.store.lock();
    let defs: Vec<ResourceDef> = store.resources.iter().filter(|r| r.served).map(|r| r.def.clone()).collect();
    drop(store);
    let segs: Vec<&str> = path.trim_matches('/').split('/').filter(|s| !s.is_empty()).collect();
    let resource_list = |group: &str, version: &str| {
        let resources: Vec<Value> = defs
            .iter()
            .filter(|d| d.group == group && d.version == version)
            .map(|d| {
                let mut r = json!({
                    "name": d.resource,
                    "singularName": d.singular,
                    "namespaced": d.namespaced,
                    "kind": d.kind,
                    "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
                });
                if !d.short_names.is_empty() {
                    r["shortNames"] = json!(d.short_names);
                }
                r
            })
            .collect();
        let gv = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
        (!resources.is_empty()).then(|| {
            json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources})
        })
    };
    let group_doc = |group: &str| {
        let mut versions: Vec<&str> =
            defs.iter().filter(|d| d.group == group).map(|d| d.version.as_str()).collect();
        versions.dedup();
        let versions: Vec<Value> =
            versions.iter().map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v})).collect();
        let preferred = versions.first().cloned();
        preferred.map(|p| json!({"name": group, "versions": versions, "preferredVersion": p}))
    };
    let doc = match segs.as_slice() {
        ["version"] => Some(json!({
            "major": "1", "minor": "34", "gitVersion": "v1.34.0-kcache-testserver",
            "gitCommit": "", "gitTreeState": "clean", "buildDate": "", "goVersion": "",
            "compiler": "rust", "platform": "linux/amd64",
        })),
        ["api"] => Some(json!({
            "kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": shared.addr.to_string()}],
        })),
        ["api", v] => resource_list("", v),
        ["apis"] => {
            let mut groups: Vec<&str> =
                defs.iter().filter(|d| !d.group.is_empty()).map(|d| d.group.as_str()).collect();
            groups.sort_unstable();
            groups.dedup();
            let groups: Vec<Value> = groups.iter().filter_map(|g| group_doc(g)).collect();
            Some(json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}))
        }
        ["apis", g] => group_doc(g).map(|mut d| {
            d["kind"] = json!("APIGroup");
            d["apiVersion"] = json!("v1");
            d
        }),
        ["apis", g, v] => resource_list(g, v),
        ["healthz"] | ["readyz"] | ["livez"] => {
            return respond(200, Bytes::from_static(b"ok"), None);
        }
        _ => None,
    };
    match doc {
        Some(d) => json_response(200, &d),
        None => error_response(&ApiError::path_not_found()),
    }
}
