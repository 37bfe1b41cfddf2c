package releasegate_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/JorisJonkers-dev/delivery/internal/release"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"
	"github.com/JorisJonkers-dev/delivery/internal/testenv/wait"
)

// jobStartHold is a validating admission webhook on the API server that
// holds the first start of each Job (suspend true to false) until the test
// lets it go, and then refuses it. It puts the leader's round exactly
// between the record's write and the Job's start, a window a kill from
// outside would otherwise hit only by chance.
type jobStartHold struct {
	mu sync.Mutex
	// held is every Job whose first start was held, by namespace/name.
	held map[string]bool
	// arrived gets the Job each time a first start is held.
	arrived chan string
	// release lets every held start go on.
	release chan struct{}
}

func (h *jobStartHold) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	req := review.Request
	review.Response = &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	var now, was batchv1.Job
	starting := json.Unmarshal(req.Object.Raw, &now) == nil && json.Unmarshal(req.OldObject.Raw, &was) == nil &&
		isSuspended(&was) && !isSuspended(&now)
	key := req.Namespace + "/" + req.Name
	h.mu.Lock()
	first := starting && !h.held[key]
	if first {
		h.held[key] = true
	}
	h.mu.Unlock()
	if first {
		h.arrived <- key
		select {
		case <-h.release:
		case <-r.Context().Done():
		}
		review.Response.Allowed = false
		review.Response.Result = &metav1.Status{Message: "the test held this start while the replica that asked was killed"}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(review)
}

func isSuspended(j *batchv1.Job) bool { return j.Spec.Suspend != nil && *j.Spec.Suspend }

// holdJobStarts registers a jobStartHold with cp's API server.
func holdJobStarts(t testing.TB, cp *testenv.ControlPlane) *jobStartHold {
	t.Helper()
	h := &jobStartHold{held: map[string]bool{}, arrived: make(chan string, 1), release: make(chan struct{})}
	srv := httptest.NewTLSServer(h)
	t.Cleanup(func() { close(h.release); srv.Close() })
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	url := srv.URL + "/validate"
	fail, none, timeout := admissionregistrationv1.Fail, admissionregistrationv1.SideEffectClassNone, int32(30)
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "hold-job-starts"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "hold-job-starts.test.invalid",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: ca},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update}, Rule: admissionregistrationv1.Rule{APIGroups: []string{"batch"}, APIVersions: []string{"v1"}, Resources: []string{"jobs"}}}},
			FailurePolicy:           &fail,
			SideEffects:             &none,
			TimeoutSeconds:          &timeout,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	if _, err := cp.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(context.Background(), cfg, metav1.CreateOptions{}); err != nil {
		t.Fatalf("register the webhook: %v", err)
	}
	return h
}

// TestLeaderKilledBetweenTheRecordAndTheJobStart kills the leading replica
// 20 times with SIGKILL while its round has written the record and its Job
// start is in flight (held at the API server's admission). Twenty
// Applications with proven migrations wait from the start, so each new
// leader's first round starts what the dead ones decided and is held at the
// next. Each time the other replica leads within a lease duration plus a
// retry, and across the 20 kills no migration Job is started twice: the
// start names the resourceVersion it read, and the record already says the
// migration is the release's.
func TestLeaderKilledBetweenTheRecordAndTheJobStart(t *testing.T) {
	cp := testenv.Own(t)
	hold := holdJobStarts(t, cp)
	starts := watchStarts(t, cp)
	p := newPair(t, cp, testLeader)
	const kills = 20
	var jobs []string
	apps := map[string]string{}
	for range kills {
		ns := cp.Namespace(t)
		proven := &app{ns: ns, name: "shop", migration: true, testedAgainst: prevRev,
			members: []member{{process: "shop-api", phase: "Waiting", applied: "s-2", promoted: "s-1", image: "shop:2", primaryImage: "shop:1"}},
			jobs:    []job{{name: "shop-migration-" + tag, suspended: true}},
			record:  &release.Record{Namespace: ns, Application: "shop", Serving: prevRev, Primaries: digestsOf("shop-api", "s-1")}}
		proven.apply(t, cp)
		key := ns + "/shop-migration-" + tag
		jobs = append(jobs, key)
		apps[key] = ns
	}
	a, b := p.start(), p.start()
	leader := p.leaderAmong(30*time.Second, a, b)
	follower := map[*replica]*replica{a: b, b: a}[leader]

	for i := range kills {
		// The leader's round has written the record and asked for a start.
		var key string
		select {
		case key = <-hold.arrived:
		case <-time.After(time.Minute):
			t.Fatalf("turn %d: no round asked to start a Job within a minute:\n%s", i, leader.logs.String())
		}
		ns, ok := apps[key]
		if !ok {
			t.Fatalf("turn %d: held the start of %s, a Job of no Application here", i, key)
		}
		if rec, ok := readRecord(t, cp, ns, "shop"); !ok || rec.Migrated == "" {
			t.Fatalf("turn %d: the start of %s came before the record said the migration is the release's: %+v", i, key, rec)
		}
		deadline := testLeader.LeaseDuration + testLeader.RetryPeriod + 5*time.Second
		var took time.Duration
		leader, follower, took = p.failover(leader, follower, syscall.SIGKILL, deadline)
		t.Logf("turn %d: SIGKILL mid-round at %s, %s leads after %s", i, key, leader.name, took.Round(time.Millisecond))
	}
	// The last leader's rounds start what is left.
	wait.Poll{Within: time.Minute, Every: 100 * time.Millisecond}.Until(t, "every migration started", func() (bool, string) {
		var left []string
		for _, j := range jobs {
			ns, name, _ := strings.Cut(j, "/")
			if suspended(t, cp, ns, name) {
				left = append(left, j)
			}
		}
		return len(left) == 0, fmt.Sprintf("still suspended: %v", left)
	})
	for _, j := range jobs {
		if n := starts.count(j); n != 1 {
			t.Errorf("Job %s was started %d times", j, n)
		}
	}
	var twice []string
	logged := map[string]int{}
	for _, r := range p.all {
		for _, line := range strings.Split(r.logs.String(), "\n") {
			var l struct{ Msg, Namespace, Job string }
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "migration started" {
				logged[l.Namespace+"/"+l.Job]++
			}
		}
	}
	for j, n := range logged {
		if n > 1 {
			twice = append(twice, fmt.Sprintf("%s by %d rounds", j, n))
		}
	}
	if len(twice) > 0 {
		t.Errorf("started more than once: %v", twice)
	}
}
