// Command leaderelection-go is one client-go leader-election candidate: client-go v0.37.2's
// tools/leaderelection LeaderElector with a LeaseLock (resourcelock.NewFromKubeconfig, as
// controller-runtime builds it), so that kcache-leaderelection candidates can be tested against
// the real thing on the same Lease.
//
// Usage:
//
//	leaderelection-go -kubeconfig PATH -namespace NS -name LEASE -identity ID \
//	    [-lease-duration 3s] [-renew-deadline 1s] [-retry-period 500ms] [-release-on-cancel] \
//	    [-content-type application/json] \
//	    [-coordinated [-binary-version 1.36.3] [-emulation-version 1.36.0]]
//
// With -coordinated it runs client-go's coordinated leader election (KEP-4355): a LeaseCandidate
// (leaderelection.NewCandidate, strategy OldestEmulationVersion) named after the identity, and the
// elector with Coordinated: true, which follows the holder the API server's coordinator writes.
//
// It prints one JSON line per event on stdout, with the wall-clock time in Unix nanoseconds:
//
//	{"t":1796638272123456789,"id":"go-1","lang":"go","event":"started_leading"}
//
// Events: "ready" (the elector is built and runs), "new_leader" (with "leader", client-go's
// OnNewLeader), "started_leading" (OnStartedLeading), "cancel" (a signal is about to cancel
// Run's context), "stopped_leading" (the context OnStartedLeading got is done: from then on this
// process no longer believes it leads), "on_stopped_leading" (the OnStoppedLeading callback),
// "exit" (Run returned).
//
// SIGTERM or SIGINT cancels Run's context: a clean stop, which with -release-on-cancel releases
// the lease. SIGKILL is a crash. kcache's e2e suite (xtask/e2e) runs it next to the Rust side's
// candidate, `le-candidate`, which prints the same lines.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

var out = struct {
	sync.Mutex
	enc *json.Encoder
}{enc: json.NewEncoder(os.Stdout)}

var identity string

// emit prints one event line; the timestamp is taken under the lock, so lines are in time order.
func emit(event string, fields map[string]any) {
	out.Lock()
	defer out.Unlock()
	line := map[string]any{"t": time.Now().UnixNano(), "id": identity, "lang": "go", "event": event}
	for k, v := range fields {
		line[k] = v
	}
	if err := out.enc.Encode(line); err != nil {
		fmt.Fprintln(os.Stderr, "leaderelection-go: writing an event:", err)
	}
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the API server")
	namespace := flag.String("namespace", "default", "namespace of the Lease")
	name := flag.String("name", "", "name of the Lease")
	flag.StringVar(&identity, "identity", "", "this candidate's identity")
	leaseDuration := flag.Duration("lease-duration", 3*time.Second, "LeaseDuration")
	renewDeadline := flag.Duration("renew-deadline", time.Second, "RenewDeadline")
	retryPeriod := flag.Duration("retry-period", 500*time.Millisecond, "RetryPeriod")
	releaseOnCancel := flag.Bool("release-on-cancel", false, "ReleaseOnCancel")
	contentType := flag.String("content-type", "", "request body encoding; empty: the clientset's default, protobuf (kcache-testserver speaks JSON only: pass application/json)")
	coordinated := flag.Bool("coordinated", false, "coordinated leader election: publish a LeaseCandidate, follow the coordinator")
	binaryVersion := flag.String("binary-version", "1.36.3", "the LeaseCandidate's binaryVersion (with -coordinated)")
	emulationVersion := flag.String("emulation-version", "1.36.0", "the LeaseCandidate's emulationVersion (with -coordinated)")
	klog.InitFlags(nil)
	flag.Parse()
	if *name == "" || identity == "" || *kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "leaderelection-go: -kubeconfig, -name and -identity are required")
		os.Exit(2)
	}

	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "leaderelection-go: kubeconfig:", err)
		os.Exit(1)
	}
	config.ContentType = *contentType
	// As controller-runtime: the lock's client times out after max(RenewDeadline/2, 1s).
	lock, err := resourcelock.NewFromKubeconfig(resourcelock.LeasesResourceLock, *namespace, *name,
		resourcelock.ResourceLockConfig{Identity: identity}, config, *renewDeadline)
	if err != nil {
		fmt.Fprintln(os.Stderr, "leaderelection-go: lock:", err)
		os.Exit(1)
	}

	ctx, cancel := context.WithCancel(context.Background())
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-signals
		// Cancelling the context cancels OnStartedLeading's at once (context cancellation
		// propagates synchronously): from this line on, this process no longer believes it leads.
		emit("cancel", nil)
		cancel()
	}()

	if *coordinated {
		clientset, err := kubernetes.NewForConfig(config)
		if err != nil {
			fmt.Fprintln(os.Stderr, "leaderelection-go: clientset:", err)
			os.Exit(1)
		}
		candidate, _, err := leaderelection.NewCandidate(clientset, *namespace, identity, *name,
			*binaryVersion, *emulationVersion, coordinationv1.OldestEmulationVersion)
		if err != nil {
			fmt.Fprintln(os.Stderr, "leaderelection-go: lease candidate:", err)
			os.Exit(1)
		}
		go candidate.Run(ctx)
	}

	var leading sync.WaitGroup
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   *leaseDuration,
		RenewDeadline:   *renewDeadline,
		RetryPeriod:     *retryPeriod,
		ReleaseOnCancel: *releaseOnCancel,
		Name:            *name,
		Coordinated:     *coordinated,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				leading.Add(1)
				defer leading.Done()
				emit("started_leading", nil)
				<-ctx.Done()
				emit("stopped_leading", nil)
			},
			OnStoppedLeading: func() { emit("on_stopped_leading", nil) },
			OnNewLeader:      func(id string) { emit("new_leader", map[string]any{"leader": id}) },
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "leaderelection-go: elector:", err)
		os.Exit(1)
	}
	emit("ready", nil)
	elector.Run(ctx)
	// OnStartedLeading runs in a goroutine of its own; wait for its last line.
	leading.Wait()
	emit("exit", nil)
}
