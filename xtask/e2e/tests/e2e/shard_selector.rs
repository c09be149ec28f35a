//! Server-side sharded list and watch (issue 34, KEP-5866) on the cluster's servers: the main
//! one with `ShardedListAndWatch` on, the unsharded one without. kcache-shard-selector's hash
//! and ranges must place every object where kube-apiserver does; kcache-testserver's protobuf
//! sharded list must be kube-apiserver's bytes. (The answers request by request, malformed
//! selectors included, are the differential steps in `kcache_e2e::differential`.)

use std::collections::BTreeSet;

use anyhow::{Context, Result, ensure};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kcache_e2e::{Cluster, ClusterKind, skip};
use kcache_protobuf::MEDIA_TYPE;
use kcache_shard_selector::{ShardKey, ShardSelector};
use kube::api::{Api, PostParams, WatchEvent};
use serde_json::Value;

use crate::configmap;
use crate::protobuf::{encode_list, get};

fn q(s: &str) -> String {
    s.bytes()
        .map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect()
}

fn names(list: &Value) -> Result<BTreeSet<String>> {
    let items = list["items"].as_array().context("items")?;
    items.iter().map(|i| i["metadata"]["name"].as_str().map(str::to_owned).context("name")).collect()
}

/// apiserver's cacher `GetList` (`MatchesSharding`, `SetShardInfoOnList`) and
/// `filterWithAttrsAndPrefixFunction`: three shards from `ShardSelector::split` list exactly the
/// objects our hash puts in them, disjoint and together complete, each list echoing the
/// canonical selector; a sharded watch delivers only in-range events; on `local` the protobuf
/// list is kcache-protobuf's encoding of the JSON one (so kcache-testserver's); the unsharded
/// server ignores the selector.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_lists_and_watches_split_the_objects() -> Result<()> {
    let c = Cluster::connect().await?;
    let ns = c.namespace(&c.main, "shards").await?;
    let client = c.main.client();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    let mut uids = Vec::new();
    for i in 0..30 {
        let cm = cms.create(&PostParams::default(), &configmap(&format!("cm-{i:02}"), "0")).await?;
        uids.push((cm.metadata.name.context("name")?, cm.metadata.uid.context("uid")?));
    }
    let path = format!("/api/v1/namespaces/{}/configmaps", ns.name);
    let mut seen = BTreeSet::new();
    for shard in ShardSelector::split(ShardKey::Uid, 3) {
        let url = format!("{path}?shardSelector={}", q(&shard.to_string()));
        let (code, _, body) = get(&client, &url, "application/json").await?;
        ensure!(code == 200, "sharded list: {code}");
        let list: Value = serde_json::from_slice(&body)?;
        ensure!(
            list["metadata"]["shardInfo"]["selector"] == shard.to_string(),
            "shardInfo: {}",
            list["metadata"]
        );
        let got = names(&list)?;
        let want: BTreeSet<String> =
            uids.iter().filter(|(_, uid)| shard.matches_value(uid)).map(|(n, _)| n.clone()).collect();
        ensure!(got == want, "{shard}: the server listed {got:?}, our hash says {want:?}");
        ensure!(got.is_disjoint(&seen), "an object in two shards");
        seen.extend(got);
        if c.kind == ClusterKind::Local {
            let rv = list["metadata"]["resourceVersion"].as_str().context("resourceVersion")?;
            let exact = format!("{url}&resourceVersion={rv}&resourceVersionMatch=Exact");
            let (code, ct, pb) = get(&client, &exact, MEDIA_TYPE).await?;
            ensure!((code, ct.as_str()) == (200, MEDIA_TYPE), "protobuf sharded list: {code} {ct}");
            ensure!(
                pb == encode_list("v1", "ConfigMapList", &list)?,
                "kube-apiserver's protobuf sharded list differs from kcache-protobuf's encoding of its JSON"
            );
        }
    }
    ensure!(seen.len() == uids.len(), "every object in some shard");

    // A sharded watch: in-range events only, up to an in-range sentinel created last.
    let shard = ShardSelector::split(ShardKey::Uid, 2).remove(1);
    let rv = cms.list(&Default::default()).await?.metadata.resource_version.context("rv")?;
    let url = format!("{path}?watch=true&resourceVersion={rv}&shardSelector={}", q(&shard.to_string()));
    let mut events =
        client.request_events::<ConfigMap>(http::Request::get(url).body(Vec::new())?).await?.boxed();
    let mut want = Vec::new();
    let mut i = 0;
    let sentinel = loop {
        let cm = cms.create(&PostParams::default(), &configmap(&format!("w-{i:02}"), "0")).await?;
        i += 1;
        let name = cm.metadata.name.clone().context("name")?;
        if shard.matches(&cm.metadata) {
            want.push(name.clone());
            if want.len() == 3 {
                break name;
            }
        }
    };
    let mut got = Vec::new();
    while got.last() != Some(&sentinel) {
        match events.try_next().await?.context("the watch ended")? {
            WatchEvent::Added(cm) => {
                ensure!(shard.matches(&cm.metadata), "an out-of-range event: {:?}", cm.metadata.name);
                got.push(cm.metadata.name.context("name")?);
            }
            WatchEvent::Bookmark(_) => {}
            other => anyhow::bail!("unexpected {other:?}"),
        }
    }
    ensure!(got == want, "watched {got:?}, expected {want:?}");

    // The server without the gate: the same selector is ignored, no shardInfo.
    let Some(unsharded) = c.unsharded.as_ref() else {
        skip("sharded_lists_and_watches_split_the_objects", "no server without ShardedListAndWatch");
        return Ok(());
    };
    if c.kind == ClusterKind::Embedded {
        // The embedded unsharded server holds data of its own.
        let api: Api<ConfigMap> = Api::namespaced(unsharded.client(), "default");
        for i in 0..4 {
            api.create(&PostParams::default(), &configmap(&format!("u-{}-{i}", ns.name), "0")).await?;
        }
    }
    let ns_path = if c.kind == ClusterKind::Embedded {
        "/api/v1/namespaces/default/configmaps".to_owned()
    } else {
        path
    };
    let (_, _, all) = get(&unsharded.client(), &ns_path, "application/json").await?;
    let all: Value = serde_json::from_slice(&all)?;
    let none = "shardRange(object.metadata.uid, '0x0000000000000000', '0x0000000000000001')";
    let (code, _, body) =
        get(&unsharded.client(), &format!("{ns_path}?shardSelector={}", q(none)), "application/json").await?;
    let list: Value = serde_json::from_slice(&body)?;
    ensure!(
        code == 200 && list["metadata"].get("shardInfo").is_none(),
        "unsharded: {code} {}",
        list["metadata"]
    );
    ensure!(names(&list)? == names(&all)?, "the unsharded server filtered");
    Ok(())
}
