//! The Go conformance table: `tests/data/fnv_conformance.tsv`, written by `xtask/shard-hash-go`
//! with apimachinery v0.37.2's `sharding.HashField`, `NewSelector(...).String()` and
//! `Matches` on 1211 seeded uids and namespaces (`cargo xtask shard-conformance` regenerates
//! and checks it; this test needs no Go).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kcache_shard_selector::{ShardKey, ShardSelector, fnv1a_64, hash_hex};

const TABLE: &str = include_str!("../data/fnv_conformance.tsv");

/// apimachinery `HashField`, `String()` and `Selector.Matches` agree with ours on every row.
#[test]
fn go_conformance_table() {
    let mut selectors = Vec::new();
    let mut rows = 0;
    for line in TABLE.lines() {
        if let Some(rest) = line.strip_prefix("# selector ") {
            let (_, rendered) = rest.split_once('\t').expect("selector line");
            let parsed = ShardSelector::parse(rendered).expect("Go's String() parses");
            assert_eq!(parsed.to_string(), rendered, "Display is Go's String()");
            selectors.push(parsed);
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let cols: Vec<&str> = line.split('\t').collect();
        let [key, value, hash, flags] = cols[..] else { panic!("malformed row {line:?}") };
        assert_eq!(hash_hex(value), hash, "HashField({value:?})");
        assert_eq!(fnv1a_64(value.as_bytes()), u64::from_str_radix(hash, 16).unwrap());
        let (key, meta) = match key {
            "uid" => (ShardKey::Uid, ObjectMeta { uid: Some(value.to_owned()), ..Default::default() }),
            "namespace" => {
                (ShardKey::Namespace, ObjectMeta { namespace: Some(value.to_owned()), ..Default::default() })
            }
            other => panic!("unknown key {other}"),
        };
        assert_eq!(flags.len(), selectors.len(), "{line:?}");
        for (selector, flag) in selectors.iter().zip(flags.chars()) {
            let want = match flag {
                '-' => {
                    assert_ne!(selector.key(), key);
                    continue;
                }
                f => f == '1',
            };
            assert_eq!(selector.key(), key);
            assert_eq!(selector.matches(&meta), want, "{selector} on {value:?}");
            assert_eq!(selector.matches_value(value), want);
        }
        rows += 1;
    }
    assert_eq!(selectors.len(), 5);
    assert!(rows >= 1000, "{rows} rows");
}
