package releasegate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// LeaseName is the Lease in GATE_NAMESPACE whose holder runs the rounds; the
// gate's Role grants get and update on it alone.
const LeaseName = "release-gate"

// LeaderSettings say how the replicas share the rounds: every replica
// answers webhooks, only the holder of the Lease reconciles.
type LeaderSettings struct {
	Namespace, Identity string
	// LeaseDuration is how long a Lease not renewed keeps the others out;
	// RenewDeadline how long the holder tries to renew before it stops
	// acting; RetryPeriod how often everyone tries.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// DefaultLeader is the timing unless LEADER_* say otherwise: client-go's
// usual ratio, shortened so a failover costs one round, not four.
var DefaultLeader = LeaderSettings{LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}

// Check refuses timings under which two replicas could act at once: the
// holder must give up renewing (and so stop acting) before the Lease can
// have expired for the others, with a retry to spare.
func (s LeaderSettings) Check() error {
	switch {
	case s.Identity == "":
		return errors.New("no identity for the Lease: set POD_NAME")
	case s.RetryPeriod <= 0:
		return fmt.Errorf("LEADER_RETRY_PERIOD %s must be above 0", s.RetryPeriod)
	case s.RenewDeadline <= time.Duration(leaderelection.JitterFactor*float64(s.RetryPeriod)):
		return fmt.Errorf("LEADER_RENEW_DEADLINE %s must be over %.1f times LEADER_RETRY_PERIOD %s", s.RenewDeadline, leaderelection.JitterFactor, s.RetryPeriod)
	case s.LeaseDuration <= s.RenewDeadline:
		return fmt.Errorf("LEADER_LEASE_DURATION %s must be over LEADER_RENEW_DEADLINE %s, or two replicas could act at once", s.LeaseDuration, s.RenewDeadline)
	}
	return nil
}

// Leader runs the rounds while this replica holds the Lease.
type Leader struct {
	settings LeaderSettings
	client   kubernetes.Interface
	logger   *slog.Logger
	leading  atomic.Bool
}

// NewLeader campaigns for the Lease through client once Run is called.
func NewLeader(client kubernetes.Interface, s LeaderSettings, logger *slog.Logger) (*Leader, error) {
	if err := s.Check(); err != nil {
		return nil, err
	}
	return &Leader{settings: s, client: client, logger: logger}, nil
}

// Leading reports whether this replica holds the Lease now.
func (l *Leader) Leading() bool { return l.leading.Load() }

// Run campaigns until ctx ends; each time it wins, lead runs with a context
// that ends when the Lease is lost, and Run waits for lead to return before
// it campaigns again, so this replica never acts outside its term. When ctx
// ends it releases the Lease, so another replica leads within a retry period
// rather than a lease duration.
func (l *Leader) Run(ctx context.Context, lead func(ctx context.Context)) error {
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, l.settings.Namespace, LeaseName,
		l.client.CoreV1(), l.client.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: l.settings.Identity})
	if err != nil {
		return fmt.Errorf("the Lease %s/%s: %w", l.settings.Namespace, LeaseName, err)
	}
	for ctx.Err() == nil {
		if err := l.term(ctx, lock, lead); err != nil {
			return err
		}
	}
	return nil
}

// term campaigns once and, if it wins, leads until the Lease is lost or ctx
// ends. client-go starts OnStartedLeading on a goroutine of its own, so a
// term that begins after the elector returned is refused rather than raced.
func (l *Leader) term(ctx context.Context, lock resourcelock.Interface, lead func(ctx context.Context)) error {
	var (
		mu       sync.Mutex
		over     bool
		finished chan struct{}
	)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   l.settings.LeaseDuration,
		RenewDeadline:   l.settings.RenewDeadline,
		RetryPeriod:     l.settings.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            LeaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(termCtx context.Context) {
				mu.Lock()
				if over {
					mu.Unlock()
					return
				}
				finished = make(chan struct{})
				done := finished
				l.leading.Store(true)
				mu.Unlock()
				defer close(done)
				l.logger.Info("leading", slog.String("identity", l.settings.Identity))
				lead(termCtx)
			},
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return fmt.Errorf("the Lease %s/%s: %w", l.settings.Namespace, LeaseName, err)
	}
	// Run returns once the term ended (the Lease lost, or released as ctx
	// ended) or ctx ended before one began; the term's context is done.
	elector.Run(ctx)
	mu.Lock()
	over = true
	done := finished
	mu.Unlock()
	if done != nil {
		<-done
		l.leading.Store(false)
		l.logger.Info("no longer leading", slog.String("identity", l.settings.Identity))
	}
	return nil
}
