//! Request handling: authentication, injected faults and the request log around every request,
//! then routing to the verbs (reads, writes, watch) and discovery.

mod discovery;
mod reads;
mod writes;

use std::sync::Arc;
use std::time::SystemTime;

use http::{Method, Request, Response, header};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::faults::{FaultBody, RequestFault, Verb};
use crate::log::RequestRecord;
use crate::request::{Query, Route, route};
use crate::response::{ResBody, error_response, plain_text_response};
use crate::state::Shared;
use crate::status::ApiError;

/// Why a request got no answer: its connection is dropped instead (hyper closes a connection
/// whose service fails).
#[derive(Debug)]
pub(crate) struct Dropped;

impl std::fmt::Display for Dropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("kcache-testserver: connection dropped (unreachable fault)")
    }
}

impl std::error::Error for Dropped {}

/// Entry point for every request: `Err` drops the connection without an answer.
pub(crate) async fn handle(
    shared: Arc<Shared>,
    generation: CancellationToken,
    connection: u64,
    req: Request<Incoming>,
) -> Result<Response<ResBody>, Dropped> {
    let at = shared.clock.now();
    let time = SystemTime::now();
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let raw_query = req.uri().query().unwrap_or_default().to_string();
    let query = Query::parse(&raw_query);
    let route = route(&shared.store, &path);
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
    let record = |status: u16, content_type: &str| RequestRecord {
        method: method.clone(),
        path: path.clone(),
        query: raw_query.clone(),
        verb,
        watch,
        connection,
        status,
        content_type: content_type.to_owned(),
        user: user.clone(),
        at,
        time,
    };

    // An unreachable server answers nothing: the request waits (as a client waits for a packet
    // that never comes) until the fault is removed, and then its connection is dropped. Checked
    // before anything is served, so the request has no effect, like one lost on the way.
    let unreachable = shared.faults.lock().unreachable(verb, &path, user.as_deref());
    if let Some(id) = unreachable {
        let mut removed = shared.faults.lock().removed.subscribe();
        loop {
            if !shared.faults.lock().has_lasting(id) {
                break;
            }
            tokio::select! {
                changed = removed.changed() => if changed.is_err() { break },
                () = generation.cancelled() => break,
            }
        }
        tracing::debug!(%method, %path, "kcache-testserver: unreachable, connection dropped");
        shared.log.lock().push(record(0, ""));
        return Err(Dropped);
    }

    let fault = if auth.is_ok() {
        shared.faults.lock().take_request_fault(verb, &path, user.as_deref())
    } else {
        None
    };
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
            Ok(None) => discovery::discovery(&shared, &method, &path),
            Ok(Some(route)) => match serve(&shared, generation.clone(), req, route, verb, &query).await {
                Ok(r) => r,
                Err(e) => error_response(&e),
            },
        }
    };
    tracing::debug!(%method, %path, query = %raw_query, status = response.status().as_u16(), watch, "kcache-testserver");
    let content_type =
        response.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    shared.log.lock().push(record(response.status().as_u16(), content_type));
    // A slow server has done the work (a write is stored) but answers late.
    let delay = shared.faults.lock().delay(verb, &path, user.as_deref());
    if !delay.is_zero() {
        tokio::select! {
            () = shared.clock.sleep(delay) => {}
            () = generation.cancelled() => return Err(Dropped),
        }
    }
    Ok(response)
}

/// The verb of a request, as RBAC and the fault filters name it.
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

/// The Status an injected fault answers with; a 403 without a message names the request as
/// RBAC's denial does.
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

/// Serves a routed resource request with its verb.
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
    if verb == Verb::Patch {
        // As PatchResource: the patch type is checked before anything else.
        writes::check_patch_type(&route.def, &content_type)?;
    }
    let accept = req.headers().get(header::ACCEPT).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let user_agent = req.headers().get(header::USER_AGENT).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let writer = writes::Writer::new(query, user_agent);
    // `kube::Api::*_metadata` asks for PartialObjectMetadata(List) through Accept; client-go
    // configured for protobuf asks for `application/vnd.kubernetes.protobuf` first, which the
    // reads of a built-in kind are answered in.
    let protobuf =
        if !shared.protobuf || route.def.is_custom() || !matches!(verb, Verb::Get | Verb::List | Verb::Watch)
        {
            None
        } else {
            kcache_protobuf::MessageType::for_kind(&route.def.api_version(), &route.def.kind)
        };
    // A built-in resource's route (go-restful) checks the media types first, parameters cut
    // off; custom resources have no such router. Then the handler negotiates, conversions
    // included.
    if !route.def.is_custom() && !crate::media::restful_accepts(accept.as_deref()) {
        return Err(crate::media::restful_not_acceptable(matches!(verb, Verb::List | Verb::Watch)));
    }
    let output = crate::media::negotiate_output(accept.as_deref(), verb == Verb::Watch, protobuf)?;
    match serve_as(shared, generation, req, route, verb, query, output, writer, &content_type).await {
        // A client that negotiated protobuf gets its errors in protobuf too.
        Err(e) if output.protobuf().is_some() => Ok(crate::response::protobuf_error_response(&e)),
        r => r,
    }
}

/// [`serve`] once the response's media type is negotiated.
#[allow(clippy::too_many_arguments)]
async fn serve_as(
    shared: &Arc<Shared>,
    generation: CancellationToken,
    req: Request<Incoming>,
    route: Route,
    verb: Verb,
    query: &Query,
    output: crate::media::Output,
    writer: writes::Writer,
    content_type: &str,
) -> Result<Response<ResBody>, ApiError> {
    // The conversion applies to what the verb reads: one object for a get (and for each
    // event of a watch), a list for a list (`asPartialObjectMetadata(List)`).
    let partial = match (verb, output) {
        (Verb::List, crate::media::Output::Partial { list: false, .. }) => {
            return Err(crate::media::partial_object_of_a_list(&route.def));
        }
        (Verb::List, crate::media::Output::Partial { api_version, .. }) => Some(api_version),
        (Verb::Get, o) => {
            o.partial_object().map_err(|()| crate::media::partial_list_of_an_object(&route.def))?
        }
        _ => None,
    };
    let protobuf = output.protobuf();
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return Err(ApiError::bad_request(format!("unable to read request body: {e}"))),
    };
    // Create and update bodies, and DeleteOptions when there is a body, are decoded by the
    // negotiated input serializer (NegotiateInputSerializer): only JSON here.
    if matches!(verb, Verb::Create | Verb::Update)
        || (matches!(verb, Verb::Delete | Verb::DeleteCollection) && !body.is_empty())
    {
        crate::media::check_input(content_type)?;
    }
    let options_kind = match verb {
        Verb::Create => "CreateOptions",
        Verb::Update => "UpdateOptions",
        _ => "PatchOptions",
    };
    let dry_run = if matches!(verb, Verb::Create | Verb::Update) {
        crate::validation::dry_run(&query.all("dryRun"), options_kind)?
    } else {
        false
    };
    if matches!(verb, Verb::Update | Verb::Patch) && route.name.is_none() {
        return Err(ApiError::method_not_allowed());
    }
    if route.status && !matches!(verb, Verb::Get | Verb::Update | Verb::Patch) {
        return Err(ApiError::method_not_allowed());
    }
    let response = match verb {
        Verb::Get => reads::get(shared, &route, partial, protobuf),
        Verb::List => reads::list(shared, &route, query, partial, protobuf),
        Verb::Watch => crate::watch::watch(shared, generation, &route, query, output),
        Verb::Create => writes::create(shared, &route, &body, dry_run, &writer),
        Verb::Update => writes::update(shared, &route, &body, dry_run, &writer),
        Verb::Patch => writes::patch(shared, &route, &body, content_type, query, &writer),
        Verb::Delete => writes::delete(shared, &route, &body, query),
        Verb::DeleteCollection => writes::delete_collection(shared, &route, query, &body),
        Verb::Other => Err(ApiError::method_not_allowed()),
    };
    // kube-apiserver's warnings (`warning.AddWarning`): `299 - "<text>"`.
    let mut response = response?;
    // Every write handler ends in transformResponseObject too: what a write answers is
    // converted as a read's would be, after the write is done (so a conversion that fails
    // answers its error for a write that happened).
    if let crate::media::Output::Partial { list, api_version } = output
        && !matches!(verb, Verb::Get | Verb::List | Verb::Watch)
    {
        // The write's warnings are already headers of the response when the conversion fails.
        response = written_as_partial(response, &route.def, list, api_version)
            .unwrap_or_else(|e| error_response(&e));
    }
    for w in writer.warnings.borrow().iter() {
        let value = format!("299 - {}", serde_json::Value::String(w.clone()));
        if let Ok(v) = http::HeaderValue::from_str(&value) {
            response.headers_mut().append("warning", v);
        }
    }
    Ok(response)
}

/// A write's JSON answer as `PartialObjectMetadata` (`list` false) or
/// `PartialObjectMetadataList` of `api_version`, as transformResponseObject converts it: a
/// `Status` (a finished DELETE) is never converted; an object asked as a list, or a list (a
/// DELETECOLLECTION's) asked as an object, is the error a read gets.
fn written_as_partial(
    response: Response<ResBody>,
    def: &crate::resources::ResourceDef,
    list: bool,
    api_version: &str,
) -> Result<Response<ResBody>, ApiError> {
    let (parts, body) = response.into_parts();
    let ResBody::Full(Some(bytes)) = body else { return Ok(Response::from_parts(parts, body)) };
    let Ok(serde_json::Value::Object(written)) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return Ok(Response::from_parts(parts, ResBody::Full(Some(bytes))));
    };
    let kind = written.get("kind").and_then(|k| k.as_str()).unwrap_or_default();
    let converted = if kind == "Status" {
        return Ok(Response::from_parts(parts, ResBody::Full(Some(bytes))));
    } else if let Some(items) = written.get("items").and_then(|i| i.as_array()) {
        if !list {
            return Err(crate::media::partial_object_of_a_list(def));
        }
        // asPartialObjectMetadataList copies resourceVersion, continue and remainingItemCount.
        let mut meta = serde_json::Map::new();
        for field in ["resourceVersion", "continue", "remainingItemCount"] {
            if let Some(v) = written.get("metadata").and_then(|m| m.get(field)) {
                meta.insert(field.to_string(), v.clone());
            }
        }
        let items: Vec<_> =
            items.iter().map(|o| crate::response::partial_value(&o["metadata"], api_version)).collect();
        // asPartialObjectMetadataList appends to a nil slice: no items encode as `null`.
        let items = if items.is_empty() { serde_json::Value::Null } else { serde_json::Value::Array(items) };
        json!({"kind": "PartialObjectMetadataList", "apiVersion": api_version, "metadata": meta, "items": items})
    } else if list {
        return Err(crate::media::partial_list_of_an_object(def));
    } else {
        crate::response::partial_value(&written["metadata"], api_version)
    };
    let body = bytes::Bytes::from(serde_json::to_vec(&converted).unwrap_or_default());
    Ok(Response::from_parts(parts, ResBody::Full(Some(body))))
}
