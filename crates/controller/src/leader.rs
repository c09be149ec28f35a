//! Leader election for a controller (feature `leaderelection`): a kcache-leaderelection elector
//! run beside the informers, whose leadership is the workers' gate.
//!
//! What controller-runtime's manager does with `LeaderElection: true`: every replica syncs its
//! caches and queues keys; only the leader's workers take them; a replica that loses its lease
//! stops with an error ("leader election lost"), and a clean stop releases the lease only after
//! the workers have drained (`LeaderElectionReleaseOnCancel`).

#[cfg(feature = "leaderelection")]
pub(crate) use enabled::{LeaderElection, Leadership};

/// Without the feature: no elector, a `Leadership` that never ends on its own.
#[cfg(not(feature = "leaderelection"))]
#[derive(Default)]
pub(crate) struct Leadership;

#[cfg(not(feature = "leaderelection"))]
impl Leadership {
    /// Never completes: there is no elector to lose.
    pub(crate) async fn lost(&mut self) -> crate::error::ControllerError {
        std::future::pending().await
    }

    /// Nothing to stop.
    pub(crate) async fn stop(self) {}
}

#[cfg(feature = "leaderelection")]
mod enabled {
    use std::sync::Arc;
    use std::time::Duration;

    use kcache_leaderelection::{
        HealthzAdaptor, LeaderCallbacks, LeaderElectionConfig, LeaderElector, LeaseCandidate,
        LeaseCandidateConfig, Outcome,
    };
    use tokio::task::JoinHandle;
    use tokio_util::sync::CancellationToken;

    use crate::error::ControllerError;
    use crate::gate::WatchGate;

    /// How long past its lease's expiry a leader that could not renew still reads as healthy:
    /// kube-controller-manager's and kube-scheduler's `NewLeaderHealthzAdaptor(20 * time.Second)`.
    pub(crate) const HEALTH_TOLERANCE: Duration = Duration::from_secs(20);

    /// The leader election a controller was configured with, before `run`.
    pub(crate) struct LeaderElection {
        pub(crate) client: kube::Client,
        pub(crate) config: LeaderElectionConfig,
        /// Coordinated leader election: the LeaseCandidate this replica publishes.
        pub(crate) candidate: Option<LeaseCandidateConfig>,
    }

    /// An elector running for a controller.
    #[derive(Default)]
    pub(crate) struct Leadership {
        task: Option<JoinHandle<Result<Outcome, kcache_leaderelection::Error>>>,
        stop: CancellationToken,
    }

    impl LeaderElection {
        /// Builds the elector and its gate (open while this replica leads; unhealthy when the lease
        /// expired more than [`HEALTH_TOLERANCE`] ago without a renewal), and starts the elector.
        ///
        /// # Errors
        ///
        /// The configuration's first failed check, as [`ControllerError::LeaderElection`].
        pub(crate) fn start(self, controller: &Arc<str>) -> Result<(Leadership, WatchGate), ControllerError> {
            let (leading, rx) = tokio::sync::watch::channel(false);
            let leading = Arc::new(leading);
            let callbacks = LeaderCallbacks::new(
                {
                    let leading = Arc::clone(&leading);
                    let controller = Arc::clone(controller);
                    move |_: CancellationToken| {
                        tracing::info!(controller = %controller, "leading: the workers start");
                        leading.send_replace(true);
                    }
                },
                {
                    let leading = Arc::clone(&leading);
                    move || {
                        leading.send_replace(false);
                    }
                },
            );
            let adaptor = HealthzAdaptor::new(HEALTH_TOLERANCE);
            let stop = CancellationToken::new();
            if let Some(candidate) = self.candidate {
                // Published for as long as the elector runs (client-go's `NewCandidate(..).Run(ctx)`
                // beside `RunOrDie` on the same context).
                let candidate = LeaseCandidate::new(self.client.clone(), candidate);
                let stop = stop.clone();
                tokio::spawn(async move { candidate.run(stop).await });
            }
            let elector = LeaderElector::builder(self.client, self.config, callbacks)
                .watchdog(&adaptor)
                .build()
                .map_err(ControllerError::LeaderElection)?;
            let gate = WatchGate::new(rx).with_check(move || adaptor.check().map_err(|e| e.to_string()));
            let stop = CancellationToken::new();
            let task = tokio::spawn({
                let stop = stop.clone();
                async move { elector.run(stop).await }
            });
            Ok((Leadership { task: Some(task), stop }, gate))
        }
    }

    impl Leadership {
        /// Completes when the elector ends on its own (it lost its lease, or failed), with the error
        /// `run` returns; never while it runs.
        pub(crate) async fn lost(&mut self) -> ControllerError {
            let Some(task) = self.task.as_mut() else {
                return std::future::pending().await;
            };
            let joined = task.await;
            self.task = None;
            match joined {
                Ok(Ok(_)) => ControllerError::LeaderElectionLost,
                Ok(Err(e)) => ControllerError::LeaderElection(e),
                // The elector runs no user code (its callbacks are the gate's): a panic is a bug in
                // it, and goes on unwinding here.
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(_) => ControllerError::LeaderElectionLost,
            }
        }

        /// Stops the elector (releasing the lease if its config says so) and waits for it.
        pub(crate) async fn stop(mut self) {
            self.stop.cancel();
            if let Some(task) = self.task.take() {
                match task.await {
                    Ok(Ok(outcome)) => tracing::debug!(?outcome, "leader election stopped"),
                    Ok(Err(error)) => tracing::warn!(%error, "leader election stopped with an error"),
                    Err(_) => tracing::warn!("leader election task panicked"),
                }
            }
        }
    }

    impl Drop for Leadership {
        fn drop(&mut self) {
            // `run` dropped mid-way: the elector must not keep renewing the lease for nobody.
            self.stop.cancel();
        }
    }
}
