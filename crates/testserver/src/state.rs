//! The state shared by the [`TestServer`](crate::TestServer) handle, the listener and every
//! connection, and the users authentication knows.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::time::Duration;

use kcache_utils::Clock;
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::faults::FaultState;
use crate::log::RequestRecord;
use crate::store::Store;

/// The group whose members may do anything (bound to cluster-admin in every cluster, and
/// short-circuited by kube-apiserver's privileged-group authorizer).
pub(crate) const MASTERS: &str = "system:masters";

/// An authenticated user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct User {
    /// User name, as RBAC subjects of kind `User` name it.
    pub(crate) name: String,
    /// Groups, as RBAC subjects of kind `Group` name them.
    pub(crate) groups: Vec<String>,
}

/// One accepted connection, as a restart sees it.
#[derive(Debug)]
pub(crate) struct Connection {
    /// Requests whose response has not been completely handed to the connection yet.
    pub(crate) in_flight: AtomicUsize,
    /// The response being written is a watch stream.
    pub(crate) watching: AtomicBool,
}

/// State shared by the handle, the listener and every connection.
pub(crate) struct Shared {
    /// Objects, resourceVersion and history.
    pub(crate) store: Mutex<Store>,
    /// The current resourceVersion, published after every write so watches wake up.
    pub(crate) rv_tx: watch::Sender<u64>,
    /// Fault settings.
    pub(crate) faults: Mutex<FaultState>,
    /// Request log, shared with every [`RequestLog`](crate::RequestLog) handle.
    pub(crate) log: Arc<Mutex<Vec<RequestRecord>>>,
    /// Bookmark interval for watches opened from now on.
    pub(crate) bookmark_interval: Mutex<Duration>,
    /// Cancelled on restart; every connection and watch of the current generation watches it.
    pub(crate) generation: Mutex<CancellationToken>,
    /// Cancelled when the [`TestServer`](crate::TestServer) is dropped.
    pub(crate) shutdown: CancellationToken,
    /// The bound address.
    pub(crate) addr: SocketAddr,
    /// Number of connections accepted so far (the next connection's id).
    pub(crate) connections: AtomicU64,
    /// The open connections of every generation, by id (for
    /// [`TestServer::requests_in_flight`](crate::TestServer::requests_in_flight)).
    pub(crate) open: Mutex<HashMap<u64, Arc<Connection>>>,
    /// Namespaced objects may only be created in existing namespaces.
    pub(crate) strict_namespaces: bool,
    /// Bearer tokens and their users; empty means no authentication and no authorization.
    pub(crate) tokens: Vec<(String, User)>,
    /// With tokens: requests without a bearer token are `system:anonymous` (else 401).
    pub(crate) anonymous_auth: bool,
    /// Answer the reads of built-in kinds in protobuf when the client prefers it.
    pub(crate) protobuf: bool,
    /// The `CoordinatedLeaderElection` gate: Leases keep `strategy` and `preferredHolder`,
    /// `leasecandidates` are served and the coordinator runs.
    pub(crate) coordinated_leader_election: bool,
    /// The `ShardedListAndWatch` gate: lists, watches and deletecollections honour
    /// `shardSelector` (switchable at run time, as a server upgrade or downgrade would).
    pub(crate) sharded_list_and_watch: AtomicBool,
    /// What slow responses wait on and the request log reads.
    pub(crate) clock: Arc<dyn Clock>,
}

impl Shared {
    /// Drops the event history now.
    pub(crate) fn compact(&self) {
        self.store.lock().compact();
    }

    /// Ends the current generation and starts the next (see
    /// [`Faults::restart`](crate::Faults::restart) for what that does to connections).
    pub(crate) fn restart(&self) {
        let mut g = self.generation.lock();
        g.cancel();
        *g = self.shutdown.child_token();
    }

    /// Wakes watches after a write.
    pub(crate) fn notify(&self, rv: u64) {
        self.rv_tx.send_replace(rv);
    }
}
