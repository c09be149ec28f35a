//! Handlers: fan-out in per-key order, late handlers' replay and sync, duplicate registrations,
//! removal (before start, while busy, through a foreign informer), concurrent adding and removing
//! under load, per-handler sync, panics, races with start, and the informer's lifecycle states
//! (client-go shared_informer_test.go; each test names the scenario it mirrors).

use crate::common;

use std::time::Duration;

use common::{Ev, Harness, Recorder, create, delete, update};
use kcache_informer::{HasSynced, InformerError};

/// Several handlers see the same events, in the same per-key order, ending in the final state.
#[tokio::test]
async fn handlers_see_the_same_ordered_events() {
    let mut h = Harness::new(Duration::ZERO).await;
    create(&h.api, "pre", "0").await;
    let recs: Vec<Recorder> = (0..3).map(|_| Recorder::new()).collect();
    let regs: Vec<_> = recs.iter().map(|r| h.informer.add_event_handler(r.clone()).unwrap()).collect();
    h.start();
    h.synced().await;
    for i in 0..5 {
        create(&h.api, &format!("k{i}"), "1").await;
    }
    for round in 2..5 {
        for i in 0..5 {
            update(&h.api, &format!("k{i}"), &round.to_string()).await;
        }
    }
    delete(&h.api, "k0").await;
    delete(&h.api, "pre").await;
    for r in &recs {
        r.wait_until("final states", |ev| {
            ev.iter().filter(|e| matches!(e, Ev::Delete(..))).count() == 2
                && ev.iter().filter(|e| matches!(e, Ev::Update(_, _, n, _) if n == "4")).count() == 5
        })
        .await;
    }
    let first = recs[0].events();
    assert_eq!(first[0], Ev::Add("pre".into(), "0".into(), true));
    assert_eq!(recs[0].of("k1").len(), 4, "add + 3 updates");
    for r in &recs[1..] {
        for k in ["k0", "k1", "k2", "k3", "k4", "pre"] {
            assert_eq!(r.of(k), recs[0].of(k), "per-key sequence of {k}");
        }
    }
    for reg in &regs {
        assert!(reg.has_synced());
        assert_eq!(reg.panics(), 0);
    }
    h.stop().await;
}

/// A handler added after start gets the cache replayed as initial-list adds, to it alone; its
/// own has_synced waits for that replay.
#[tokio::test]
async fn late_handler_gets_a_replay_alone() {
    let mut h = Harness::new(Duration::ZERO).await;
    create(&h.api, "a", "1").await;
    create(&h.api, "b", "1").await;
    let early = h.start_recording("initial adds", 2).await;

    let gate = common::Gate::closed();
    let late = Recorder::gated(gate.clone());
    let reg = h.informer.add_event_handler(late.clone()).unwrap();
    assert!(!reg.has_synced(), "replay not delivered yet");
    gate.open();
    tokio::time::timeout(Duration::from_secs(20), reg.wait_synced()).await.unwrap();
    let mut got = late.events();
    got.sort_by(|a, b| a.name().cmp(b.name()));
    assert_eq!(got, [Ev::Add("a".into(), "1".into(), true), Ev::Add("b".into(), "1".into(), true)]);
    assert_eq!(early.events().len(), 2, "the replay went to the late handler only");

    create(&h.api, "c", "1").await;
    late.wait_until("live add", |ev| ev.contains(&Ev::Add("c".into(), "1".into(), false))).await;
    early.wait_until("live add", |ev| ev.len() == 3).await;
    h.stop().await;
}

/// A removed handler receives nothing more; the others go on; removing it again is a no-op.
/// Mirrors client-go shared_informer_test.go `TestRemoveWhileActive` and
/// `TestRemovingRemovedSharedInformer`.
#[tokio::test]
async fn removed_handler_stops_receiving() {
    let mut h = Harness::new(Duration::ZERO).await;
    let keep = Recorder::new();
    let gone = Recorder::new();
    h.informer.add_event_handler(keep.clone()).unwrap();
    let reg = h.informer.add_event_handler(gone.clone()).unwrap();
    h.start();
    h.synced().await;
    create(&h.api, "a", "1").await;
    gone.wait_until("a", |ev| ev.len() == 1).await;
    assert!(h.informer.remove_event_handler(&reg));
    assert!(!h.informer.remove_event_handler(&reg), "second removal is a no-op");
    create(&h.api, "b", "1").await;
    keep.wait_until("b", |ev| ev.len() == 2).await;
    // `b` was distributed to every live listener before `keep` saw it: had the removal not
    // taken, `gone` would hold it, delivered or pending.
    assert_eq!(gone.events().len(), 1);
    assert_eq!(reg.pending(), 0, "nothing queued for a removed handler");
    h.stop().await;
}

/// A handler that panics is isolated: its listener goes on with the next notification, and the
/// other handlers are unaffected.
#[tokio::test]
async fn handler_panic_is_isolated() {
    let mut h = Harness::new(Duration::ZERO).await;
    let bad = Recorder { panic_on: Some("boom".into()), ..Recorder::new() };
    let good = Recorder::new();
    let bad_reg = h.informer.add_event_handler(bad.clone()).unwrap();
    h.informer.add_event_handler(good.clone()).unwrap();
    h.start();
    h.synced().await;
    create(&h.api, "boom", "1").await;
    create(&h.api, "after", "1").await;
    bad.wait_until("the event after the panic", |ev| ev.iter().any(|e| e.name() == "after")).await;
    good.wait_until("both", |ev| ev.len() == 2).await;
    assert_eq!(bad_reg.panics(), 1);
    h.stop().await;
}

/// Adding a handler to a stopped informer is an error; settings are fixed once started; an
/// informer runs once. Mirrors client-go shared_informer_test.go `TestAddOnStoppedSharedInformer`
/// (the refusal; the settings half is client-go's `SetTransform` after start).
#[tokio::test]
async fn misuse_is_reported() {
    let mut h = Harness::new(Duration::ZERO).await;
    h.start();
    h.synced().await;
    assert!(matches!(h.informer.set_transform(|o| o), Err(InformerError::AlreadyStarted)));
    assert!(matches!(h.informer.set_watch_error_handler(|_, _| {}), Err(InformerError::AlreadyStarted)));
    let again = h.informer.run(tokio_util::sync::CancellationToken::new()).await;
    assert!(matches!(again, Err(InformerError::AlreadyStarted)));
    let informer = h.informer.clone();
    h.stop().await;
    assert!(informer.is_stopped());
    assert!(matches!(informer.add_event_handler(Recorder::new()), Err(InformerError::Stopped)));
}

/// Mirrors client-go shared_informer_test.go `TestSharedInformerRemoveHandler`: two handlers
/// registered before start are removed, the second first; each removal reports it was
/// registered, and once the informer runs neither receives anything while a third, kept
/// handler gets the initial list.
#[tokio::test]
async fn handlers_removed_before_start_receive_nothing() {
    let mut h = Harness::new(Duration::ZERO).await;
    create(&h.api, "a", "1").await;
    let first = Recorder::new();
    let second = Recorder::new();
    let kept = Recorder::new();
    let reg1 = h.informer.add_event_handler(first.clone()).unwrap();
    let reg2 = h.informer.add_event_handler(second.clone()).unwrap();
    h.informer.add_event_handler(kept.clone()).unwrap();
    assert!(h.informer.remove_event_handler(&reg2));
    assert!(h.informer.remove_event_handler(&reg1));
    h.start();
    h.synced().await;
    kept.wait_until("the initial add", |ev| ev.len() == 1).await;
    create(&h.api, "b", "1").await;
    kept.wait_until("the live add", |ev| ev.len() == 2).await;
    assert!(first.events().is_empty(), "{:?}", first.events());
    assert!(second.events().is_empty(), "{:?}", second.events());
    assert_eq!(reg1.delivered() + reg2.delivered(), 0);
    h.stop().await;
}

/// Mirrors client-go shared_informer_test.go `TestSharedInformerRemoveForeignHandler`: removing
/// one informer's registrations through another informer removes nothing, from either; the owner
/// still delivers to both handlers and can remove them itself.
///
/// Regression: handler ids were numbered per informer, so the second informer removed its own
/// handler that happened to carry the same id.
#[tokio::test]
async fn a_foreign_registration_removes_nothing() {
    let mut h = Harness::new(Duration::ZERO).await;
    let other = kcache_informer::SharedIndexInformer::from_api(h.api.clone(), Duration::ZERO);
    let mine = [Recorder::new(), Recorder::new()];
    let regs: Vec<_> = mine.iter().map(|r| h.informer.add_event_handler(r.clone()).unwrap()).collect();
    let theirs = Recorder::new();
    let their_reg = other.add_event_handler(theirs.clone()).unwrap();

    for reg in &regs {
        assert!(!other.remove_event_handler(reg), "not registered on the other informer");
    }
    assert!(!h.informer.remove_event_handler(&their_reg), "not registered on this informer");

    let cancel = tokio_util::sync::CancellationToken::new();
    let other_task = tokio::spawn({
        let (other, cancel) = (other.clone(), cancel.clone());
        async move { other.run(cancel).await }
    });
    h.start();
    h.synced().await;
    create(&h.api, "a", "1").await;
    for r in mine.iter().chain([&theirs]) {
        r.wait_until("every handler still receives", |ev| ev.len() == 1).await;
    }
    assert!(h.informer.remove_event_handler(&regs[1]));
    assert!(h.informer.remove_event_handler(&regs[0]));
    assert!(other.remove_event_handler(&their_reg));
    cancel.cancel();
    other_task.await.unwrap().unwrap();
    h.stop().await;
}

/// Mirrors client-go shared_informer_test.go `TestEventPanics` (which sets
/// `utilruntime.ReallyCrash = false`; with client-go's default the first panic crashes the
/// process, kcache's `PanicPolicy::FailInformer` in `failures.rs`): two handlers with the
/// default `PanicPolicy::Continue` that panic on every add, over an initial list of five
/// objects. Each panic is caught and counted, the listener goes on with the next notification
/// (client-go goes on after a one-second pause per panic; kcache does not pause), and unlike
/// client-go (kubernetes#129024) each registration still syncs, because a notification that
/// panicked was delivered all the same.
#[tokio::test]
async fn panicking_handlers_keep_going_and_still_sync() {
    let mut h = Harness::new(Duration::ZERO).await;
    for i in 1..=5 {
        create(&h.api, &format!("pod{i}"), "1").await;
    }
    let panicking = || {
        kcache_informer::EventHandlerFuncs::new()
            .on_add(|_: &std::sync::Arc<k8s_openapi::api::core::v1::ConfigMap>, _| panic!("fake panic"))
    };
    let regs = [
        h.informer.add_event_handler(panicking()).unwrap(),
        h.informer.add_event_handler(panicking()).unwrap(),
    ];
    h.start();
    h.synced().await;
    for reg in &regs {
        tokio::time::timeout(Duration::from_secs(20), reg.wait_synced()).await.expect("handler syncs");
        assert_eq!(reg.panics(), 5, "one caught panic per object");
        assert_eq!(reg.delivered(), 5);
    }
    h.stop().await;
}

/// Mirrors client-go shared_informer_test.go `TestRemoveEventHandler_AsynchronousPanic`: removing
/// a handler that is blocked inside a notification returns at once, without waiting for it; the
/// notification in progress then completes, and nothing further reaches the handler.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_a_busy_handler_does_not_wait_for_it() {
    use std::sync::{Arc, Mutex};

    let mut h = Harness::new(Duration::ZERO).await;
    let (entered_tx, mut entered) = tokio::sync::mpsc::unbounded_channel();
    let gate = common::Gate::closed();
    let finished = Arc::new(Mutex::new(Vec::new()));
    let busy = kcache_informer::EventHandlerFuncs::new().on_add({
        let (gate, finished) = (gate.clone(), finished.clone());
        move |cm: &Arc<k8s_openapi::api::core::v1::ConfigMap>, _| {
            let _ = entered_tx.send(());
            gate.wait();
            finished.lock().unwrap().push(common::name(cm));
        }
    });
    let reg = h.informer.add_event_handler(busy).unwrap();
    let control = Recorder::new();
    h.informer.add_event_handler(control.clone()).unwrap();
    h.start();
    h.synced().await;
    create(&h.api, "a", "1").await;
    tokio::time::timeout(Duration::from_secs(20), entered.recv()).await.expect("handler entered").unwrap();

    // Off the runtime, so a removal that waited for the blocked handler fails the test instead
    // of hanging it.
    let removal = tokio::task::spawn_blocking({
        let (informer, reg) = (h.informer.clone(), reg);
        move || informer.remove_event_handler(&reg)
    });
    let removed =
        tokio::time::timeout(Duration::from_secs(20), removal).await.expect("removal returns at once");
    assert!(removed.unwrap());
    assert!(finished.lock().unwrap().is_empty(), "the handler is still blocked");

    gate.open();
    create(&h.api, "b", "1").await;
    control.wait_until("both adds", |ev| ev.len() == 2).await;
    h.stop().await; // joins the removed handler's thread
    assert_eq!(*finished.lock().unwrap(), ["a"], "the call in progress completed; nothing after removal");
}

/// Mirrors client-go shared_informer_test.go `TestSharedInformerInitializationRace`: a handler
/// added from another thread while the informer starts is registered either before start or
/// after it; either way it receives every object of the initial list exactly once, flagged as
/// initial, and its registration syncs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handler_added_while_starting_sees_each_object_once() {
    use std::sync::{Arc, Barrier};

    let server = kcache_testserver::TestServer::start().await;
    let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(server.client(), "default");
    for i in 0..5 {
        create(&api, &format!("k{i}"), "1").await;
    }
    for _ in 0..10 {
        let informer = kcache_informer::SharedIndexInformer::from_api(api.clone(), Duration::ZERO);
        let rec = Recorder::new();
        let barrier = Arc::new(Barrier::new(2));
        let adder = std::thread::spawn({
            let (informer, rec, barrier) = (informer.clone(), rec.clone(), barrier.clone());
            move || {
                barrier.wait();
                informer.add_event_handler(rec).unwrap()
            }
        });
        let cancel = tokio_util::sync::CancellationToken::new();
        let released = tokio::task::spawn_blocking(move || barrier.wait());
        let task = tokio::spawn({
            let (informer, cancel) = (informer.clone(), cancel.clone());
            async move { informer.run(cancel).await }
        });
        released.await.unwrap();
        let reg = tokio::task::spawn_blocking(move || adder.join().unwrap()).await.unwrap();
        tokio::time::timeout(Duration::from_secs(20), reg.wait_synced()).await.expect("handler syncs");
        let mut got = rec.events();
        got.sort_by(|a, b| a.name().cmp(b.name()));
        let want: Vec<_> = (0..5).map(|i| Ev::Add(format!("k{i}"), "1".into(), true)).collect();
        assert_eq!(got, want);
        cancel.cancel();
        task.await.unwrap().unwrap();
    }
}

/// Mirrors client-go shared_informer_test.go `TestSharedInformerStartRace`: settings changed from
/// another thread while the informer starts are either accepted (before start) or refused with
/// `AlreadyStarted` (after), never accepted once refused; the informer runs and syncs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_racing_start_are_accepted_or_refused() {
    let mut h = Harness::new(Duration::ZERO).await;
    create(&h.api, "a", "1").await;
    let setter = std::thread::spawn({
        let informer = h.informer.clone();
        move || {
            let mut accepted = Vec::new();
            let mut refusals = 0;
            while refusals < 100 {
                let results = [informer.set_transform(|o| o), informer.set_watch_error_handler(|_, _| {})];
                for r in results {
                    match r {
                        Ok(()) => accepted.push(refusals),
                        Err(InformerError::AlreadyStarted) => refusals += 1,
                        Err(e) => panic!("{e}"),
                    }
                }
            }
            accepted
        }
    });
    h.start();
    h.synced().await;
    let accepted = tokio::task::spawn_blocking(move || setter.join().unwrap()).await.unwrap();
    // An acceptance after a refusal would show up as a non-zero refusal count.
    assert!(accepted.iter().all(|&refused_before| refused_before == 0), "accepted after a refusal");
    assert_eq!(h.informer.lister().list().len(), 1);
    h.stop().await;
}

/// Mirrors client-go shared_informer_test.go `TestStateSharedInformer` and
/// `TestRemoveOnStoppedSharedInformer`: an informer is not stopped before it runs nor while it
/// runs and delivers; once cancelled it reports stopped; removing a handler from the stopped
/// informer is harmless (nothing is registered any more, so it reports false) and leaves the
/// handler's delivered notifications as they were.
#[tokio::test]
async fn informer_states_and_removal_after_stop() {
    let mut h = Harness::new(Duration::ZERO).await;
    create(&h.api, "pod1", "1").await;
    let rec = Recorder::new();
    let reg = h.informer.add_event_handler(rec.clone()).unwrap();
    assert!(!h.informer.is_stopped(), "not stopped after creation");
    h.start();
    h.synced().await;
    rec.wait_until("the initial object", |ev| ev.len() == 1).await;
    assert!(!h.informer.is_stopped(), "not stopped while running");
    let informer = h.informer.clone();
    h.stop().await;
    assert!(informer.is_stopped(), "stopped once run returned");
    assert!(!informer.remove_event_handler(&reg), "the stopped informer has no handlers left");
    assert_eq!(reg.delivered(), 1);
    assert_eq!(rec.events(), [Ev::Add("pod1".into(), "1".into(), true)]);
}

/// Mirrors client-go controller_test.go `TestUpdate`: objects created and then updated from
/// several tasks at once; a controller that deletes each object once it sees the update observes
/// only the `from -> to` transition (with the old object it had seen), and hears of every delete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_carry_the_transition_and_trigger_deletes() {
    let mut h = Harness::new(Duration::ZERO).await;
    let rec = Recorder::new();
    h.informer.add_event_handler(rec.clone()).unwrap();
    let (finished_tx, mut finished) = tokio::sync::mpsc::unbounded_channel();
    let deleter = kcache_informer::EventHandlerFuncs::new().on_update(
        move |_, new: &std::sync::Arc<k8s_openapi::api::core::v1::ConfigMap>| {
            if common::value(new) == "to" {
                let _ = finished_tx.send(common::name(new));
            }
        },
    );
    h.informer.add_event_handler(deleter).unwrap();
    h.start();
    h.synced().await;
    let writers: Vec<_> = (0..3)
        .map(|i| {
            let api = h.api.clone();
            tokio::spawn(async move {
                let name = format!("a-{i}");
                create(&api, &name, "from").await;
                update(&api, &name, "to").await;
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap();
    }
    for _ in 0..3 {
        let name = tokio::time::timeout(Duration::from_secs(20), finished.recv())
            .await
            .expect("update seen")
            .unwrap();
        delete(&h.api, &name).await;
    }
    rec.wait_until("three deletes", |ev| ev.iter().filter(|e| matches!(e, Ev::Delete(..))).count() == 3)
        .await;
    for i in 0..3 {
        let name = format!("a-{i}");
        assert_eq!(
            rec.of(&name),
            [
                Ev::Add(name.clone(), "from".into(), false),
                Ev::Update(name.clone(), "from".into(), "to".into(), false),
                Ev::Delete(name.clone(), "to".into(), false),
            ]
        );
    }
    h.stop().await;
}

/// Mirrors client-go shared_informer_test.go `TestSharedInformerMultipleRegistration`: the same
/// handler added twice makes two registrations, each delivering to it; removing one leaves the
/// other working, removing both leaves none.
#[tokio::test]
async fn the_same_handler_registered_twice_is_two_registrations() {
    let mut h = Harness::new(Duration::ZERO).await;
    create(&h.api, "a", "1").await;
    let rec = Recorder::new();
    let reg1 = h.informer.add_event_handler(rec.clone()).unwrap();
    let reg2 = h.informer.add_event_handler(rec.clone()).unwrap();
    let witness = Recorder::new();
    h.informer.add_event_handler(witness.clone()).unwrap();
    h.start();
    h.synced().await;
    rec.wait_until("the initial add, once per registration", |ev| ev.len() == 2).await;

    assert!(h.informer.remove_event_handler(&reg1), "removing a duplicate registration");
    create(&h.api, "b", "1").await;
    witness.wait_until("b", |ev| ev.len() == 2).await;
    rec.wait_until("b through the remaining registration", |ev| ev.len() == 3).await;

    assert!(h.informer.remove_event_handler(&reg2));
    create(&h.api, "c", "1").await;
    witness.wait_until("c", |ev| ev.len() == 3).await;
    // `c` reached every live listener before the witness saw it.
    assert_eq!(rec.of("c").len(), 0, "no registration left: {:?}", rec.events());
    assert_eq!(rec.of("b").len(), 1);
    assert_eq!((reg1.pending(), reg2.pending()), (0, 0));
    h.stop().await;
}

/// Mirrors client-go shared_informer_test.go `TestAddWhileActive`: a registration is not synced
/// before the informer runs; one added while it runs is not synced until its replay of the cache
/// is delivered, then gets live events alongside the first.
#[tokio::test]
async fn a_handler_added_while_active_syncs_after_its_replay() {
    let mut h = Harness::new(Duration::ZERO).await;
    let first = Recorder::new();
    let reg1 = h.informer.add_event_handler(first.clone()).unwrap();
    assert!(!reg1.has_synced(), "synced before run");
    h.start();
    h.synced().await;
    create(&h.api, "pod1", "1").await;
    first.wait_until("pod1", |ev| ev.len() == 1).await;
    assert!(reg1.has_synced());

    let gate = common::Gate::closed();
    let second = Recorder::gated(gate.clone());
    let reg2 = h.informer.add_event_handler(second.clone()).unwrap();
    assert!(!reg2.has_synced(), "synced before its replay was processed");
    gate.open();
    create(&h.api, "pod2", "1").await;
    second.wait_until("pod1 replayed, then pod2", |ev| ev.len() == 2).await;
    assert_eq!(
        second.events(),
        [Ev::Add("pod1".into(), "1".into(), true), Ev::Add("pod2".into(), "1".into(), false)]
    );
    assert!(reg2.has_synced());
    first.wait_until("pod2", |ev| ev.len() == 2).await;
    assert_eq!(first.events()[1], Ev::Add("pod2".into(), "1".into(), false));
    h.stop().await;
}

/// Mirrors client-go shared_informer_test.go `TestSharedInformerHandlerAbuse`: many threads add
/// and remove handlers at random (with resync periods) while objects are created, updated and
/// deleted, and the informer is stopped under them. Nothing deadlocks or panics, every removal of
/// a live registration takes effect, and each thread ends when adding is refused as stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handlers_added_and_removed_concurrently_under_load() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    let mut h = Harness::new(Duration::from_secs(1)).await;
    h.start();
    h.synced().await;
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..8u64)
        .map(|seed| {
            let informer = h.informer.clone();
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                // A small xorshift: each thread its own deterministic sequence.
                let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
                let mut next = move || {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state
                };
                let mut regs = Vec::new();
                let (mut added, mut removed) = (0u32, 0u32);
                loop {
                    if next() % 2 == 0 {
                        match informer
                            .add_event_handler_with_resync_period(Recorder::new(), Duration::from_secs(1))
                        {
                            Ok(reg) => {
                                regs.push(reg);
                                added += 1;
                            }
                            Err(InformerError::Stopped) => return (added, removed),
                            Err(e) => panic!("unexpected error adding a handler: {e}"),
                        }
                    } else if !regs.is_empty() {
                        let reg = regs.swap_remove(usize::try_from(next()).unwrap() % regs.len());
                        let was_registered = informer.remove_event_handler(&reg);
                        assert!(
                            was_registered || informer.is_stopped(),
                            "a live registration was not removed"
                        );
                        removed += 1;
                    } else if stop.load(Ordering::Acquire) && informer.is_stopped() {
                        return (added, removed);
                    }
                }
            })
        })
        .collect();

    // Each object is created, updated, then deleted.
    for i in 0..90 {
        let name = format!("o{}", i - i % 3);
        match i % 3 {
            0 => create(&h.api, &name, "1").await,
            1 => update(&h.api, &name, "2").await,
            _ => delete(&h.api, &name).await,
        }
    }
    // Stop the informer while the threads are still adding and removing.
    stop.store(true, Ordering::Release);
    h.stop().await;
    let joined = tokio::task::spawn_blocking(move || {
        workers.into_iter().map(|w| w.join().expect("worker did not panic")).collect::<Vec<_>>()
    });
    let counts = tokio::time::timeout(Duration::from_secs(60), joined).await.expect("workers end").unwrap();
    assert!(counts.iter().all(|(added, _)| *added > 0), "{counts:?}");
    assert!(counts.iter().any(|(_, removed)| *removed > 0), "{counts:?}");
}

/// `handler_stats` reports every registered handler's counters, whoever registered it: the same
/// numbers as each `HandlerRegistration`, in registration order, and a removed handler no more
/// (what a metrics exporter reads to show each handler's backlog; client-go has no such view).
///
/// Regression: a handler's backlog was visible only through its own registration.
#[tokio::test]
async fn handler_stats_report_every_registered_handler() {
    let mut h = Harness::new(Duration::ZERO).await;
    create(&h.api, "a", "1").await;
    let gate = common::Gate::closed();
    let blocked = Recorder::gated(gate.clone());
    let options =
        |name: &str| kcache_informer::HandlerOptions { name: Some(name.into()), ..Default::default() };
    let slow = h.informer.add_event_handler_with_options(blocked.clone(), options("slow")).unwrap();
    let fast_rec = Recorder::new();
    let fast = h.informer.add_event_handler_with_options(fast_rec.clone(), options("fast")).unwrap();
    h.start();
    h.synced().await;
    create(&h.api, "b", "1").await;
    fast_rec.wait_until("both adds", |ev| ev.len() == 2).await;
    // The slow handler has taken "a" (it sits at the gate), so its buffer holds "b" alone.
    gate.wait_entered(1).await;
    let stats = h.informer.handler_stats();
    let names: Vec<&str> = stats.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["slow", "fast"]);
    // The slow handler holds "a" and has "b" waiting.
    assert_eq!((stats[0].pending, stats[0].delivered), (slow.pending(), slow.delivered()));
    assert_eq!(stats[0].pending, 1);
    assert_eq!((stats[1].pending, stats[1].delivered, stats[1].panics), (0, 2, 0));
    assert!(h.informer.remove_event_handler(&fast));
    assert_eq!(h.informer.handler_stats().len(), 1);
    gate.open();
    blocked.wait_until("both adds", |ev| ev.len() == 2).await;
    h.stop().await;
}
