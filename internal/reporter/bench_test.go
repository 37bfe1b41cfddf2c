package reporter

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/JorisJonkers-dev/delivery/internal/githubapp"
	"github.com/JorisJonkers-dev/delivery/internal/testenv"

	"github.com/JorisJonkers-dev/delivery/internal/releasepath"
)

// BenchmarkSteadyStatePass measures a pass over 200 units, each with an open
// Deployment, across 20 repositories: half the units have no blue-green
// member and wait on Flux's health checks, half have one Canary in analysis.
// It reports what the cold first pass (every read a 200, every Deployment
// written) cost as the baseline, then a steady-state pass after the writes
// settled: GitHub requests, rate-limit units spent (the goal is 0), API
// server requests and wall time.
func BenchmarkSteadyStatePass(b *testing.B) {
	const units, repos = 200, 20
	w := newWorld(b)
	var manifests strings.Builder
	var canaries strings.Builder
	for i := range units {
		project := fmt.Sprintf("p%03d", i)
		repoName := fmt.Sprintf("acme/r%02d", i%repos)
		u := unit{project: project, repo: repoName, version: "1.0.0", url: "https://" + project + ".example", pin: pin,
			applied: "latest@" + pin, attempted: "latest@" + pin, ready: "Unknown", reason: "Progressing"}
		if i%2 == 1 {
			u.canaries = []string{project + "-api"}
			canaries.WriteString(w.canaryYAML(canary{name: project + "-api", app: project, rev: revA, phase: "Progressing", iterations: 2,
				changedAt: time.Now()}))
		}
		manifests.WriteString(w.unitYAML(u))
		w.deployment(repoName, project, "1.0.0")
	}
	w.apply("%s", manifests.String())
	w.apply("%s", canaries.String())

	cfg, counter := testenv.Counting(w.cfg)
	gh, err := githubapp.New(githubapp.Config{AppID: w.fake.AppID, InstallationID: w.fake.InstallationID,
		PrivateKey: w.fake.PrivateKeyPEM, APIURL: w.fake.URL()})
	if err != nil {
		b.Fatal(err)
	}
	kube, err := releasepath.NewKube(cfg)
	if err != nil {
		b.Fatal(err)
	}
	r := &Reporter{Namespace: w.fluxNS, Cluster: kube, Deployments: NewGitHub(gh),
		Gate: releasepath.NewGateClient(w.gate.srv.URL), Logger: slog.New(slog.DiscardHandler)}

	measure := func(name string) (calls, units, kube int, took time.Duration) {
		w.fake.ResetCalls()
		counter.Reset()
		start := time.Now()
		w.pass(r)
		took = time.Since(start)
		calls, units, kube = len(w.fake.Calls()), w.fake.RateLimitUsed(), counter.Total()
		b.Logf("%-12s GitHub requests %4d, rate-limit units %4d, POSTs %3d, API server requests %4d, %v",
			name, calls, units, w.fake.CallsMatching("POST", "/statuses"), kube, took.Round(time.Millisecond))
		return
	}
	_, coldUnits, _, coldTook := measure("cold")
	measure("settle")
	b.ResetTimer()
	var calls, spent, kubeReqs int
	var took time.Duration
	for range b.N {
		calls, spent, kubeReqs, took = measure("steady")
	}
	b.StopTimer()
	if spent != 0 || w.fake.CallsMatching("POST", "/statuses") != 0 {
		b.Fatalf("a steady-state pass spent %d units", spent)
	}
	b.ReportMetric(float64(calls), "github-requests/pass")
	b.ReportMetric(float64(spent), "ratelimit-units/pass")
	b.ReportMetric(float64(kubeReqs), "apiserver-requests/pass")
	b.ReportMetric(float64(took.Milliseconds()), "ms/pass")
	b.ReportMetric(float64(spent)/float64(coldUnits), "units-vs-cold")
	b.ReportMetric(took.Seconds()/coldTook.Seconds(), "time-vs-cold")
}
