//! Helpers: a test server with one token per member, members that run a `ShardCoordinator` on
//! tokio's paused clock, and checks over their assignments.

#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use kcache_sharding::{RangeSet, ShardCoordinator, ShardingConfig};
use kcache_testserver::TestServer;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub const NS: &str = "default";
pub const GROUP: &str = "ctl";
pub const IDS: [&str; 5] = ["a", "b", "c", "d", "admin"];

/// A server whose users are the members (all in `system:masters`).
pub async fn server() -> TestServer {
    let mut b = TestServer::builder();
    for id in IDS {
        b = b.token(id, id, &["system:masters"]);
    }
    b.start().await
}

/// A running member.
pub struct Member {
    pub coordinator: ShardCoordinator,
    pub stop: CancellationToken,
    pub run: Option<JoinHandle<kcache_sharding::Result<()>>>,
}

impl Member {
    /// Starts member `id` with the default config (15 s, 10 s, 2 s), speaking as user `id`.
    pub fn start(server: &TestServer, id: &str) -> Member {
        Self::start_with(server, ShardingConfig::new(NS, GROUP, id))
    }

    pub fn start_with(server: &TestServer, config: ShardingConfig) -> Member {
        let client = server.in_memory_client_for_token(&config.identity.clone());
        let coordinator = ShardCoordinator::new(client, config).expect("valid config");
        let stop = CancellationToken::new();
        let run = {
            let (c, stop) = (coordinator.clone(), stop.clone());
            tokio::spawn(async move { c.run(stop).await })
        };
        Member { coordinator, stop, run: Some(run) }
    }

    pub fn serving(&self) -> RangeSet {
        self.coordinator.assignment().serving
    }

    /// A crash: the run stops without leaving the group (its Lease stays until it expires).
    pub fn crash(&mut self) {
        if let Some(run) = self.run.take() {
            run.abort();
        }
    }

    /// A graceful leave: waits until the run returned.
    pub async fn leave(&mut self) {
        self.stop.cancel();
        if let Some(run) = self.run.take() {
            run.await.expect("no panic").expect("run ok");
        }
    }
}

/// Advances the paused clock by `d` in steps of 100 ms, checking after each step that no two of
/// `members` (those still running) serve a common value. Returns the first instant (offset from
/// the call) from which the running members' serving sets covered everything, if they did at
/// the end.
pub async fn pass_checking(members: &[&Member], d: Duration) -> Option<Duration> {
    let step = Duration::from_millis(100);
    let mut elapsed = Duration::ZERO;
    let mut covered_since = None;
    while elapsed < d {
        tokio::time::sleep(step).await;
        elapsed += step;
        let mut union = RangeSet::empty();
        for m in members.iter().filter(|m| m.run.is_some()) {
            let s = m.serving();
            assert!(!union.overlaps(&s), "two members serve {:?} at once", union.intersection(&s));
            union = union.union(&s);
        }
        if union.is_full() {
            covered_since.get_or_insert(elapsed);
        } else {
            covered_since = None;
        }
    }
    covered_since
}
