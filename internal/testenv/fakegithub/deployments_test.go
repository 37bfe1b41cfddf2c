package fakegithub_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-github/v75/github"

	"github.com/JorisJonkers-dev/delivery/internal/testenv/fakegithub"
)

func TestDeploymentsAndStatusesThroughGoGitHub(t *testing.T) {
	ctx := context.Background()
	// The refusals below are requests GitHub's description refuses: kept,
	// and checked, rather than failing the test.
	fake := fakegithub.New(t, fakegithub.OnViolation(func(error) {}))
	gh := client(t, fake, fake.URL())
	first := fake.AddDeployment("acme/app", fakegithub.NewDeployment{Ref: "v1.0.0", SHA: "aaa", Environment: "staging",
		Payload: json.RawMessage(`{"project":"shop","version":"1.0.0"}`)})
	second := fake.AddDeployment("acme/app", fakegithub.NewDeployment{Ref: "v1.1.0", SHA: "bbb", Environment: "staging"})
	fake.AddStatus("acme/app", first, fakegithub.Status{State: "queued", LogURL: "https://ci.example/run/1"})

	// Newest first, every field go-github reads, and the filters.
	list, _, err := gh.Repositories.ListDeployments(ctx, "acme", "app", nil)
	if err != nil || len(list) != 2 || list[0].GetID() != second || list[1].GetID() != first {
		t.Fatalf("list: %v %v", list, err)
	}
	if string(list[1].Payload) != `{"project":"shop","version":"1.0.0"}` || list[1].GetEnvironment() != "staging" ||
		list[1].GetTask() != "deploy" || list[1].CreatedAt == nil || !strings.HasSuffix(list[1].GetStatusesURL(), "/statuses") {
		t.Fatalf("deployment fields: %+v", list[1])
	}
	for opts, want := range map[github.DeploymentsListOptions]int{
		{SHA: "aaa"}: 1, {Ref: "v1.1.0"}: 1, {Task: "deploy"}: 2, {Environment: "production"}: 0, {Environment: "staging"}: 2,
	} {
		got, _, err := gh.Repositories.ListDeployments(ctx, "acme", "app", &opts)
		if err != nil || len(got) != want {
			t.Errorf("filter %+v: %d deployments (%v), want %d", opts, len(got), err, want)
		}
	}
	// Paging: one per page, with a Link to the next.
	paged, resp, err := gh.Repositories.ListDeployments(ctx, "acme", "app", &github.DeploymentsListOptions{ListOptions: github.ListOptions{PerPage: 1}})
	if err != nil || len(paged) != 1 || resp.NextPage != 2 || resp.LastPage != 2 {
		t.Fatalf("page 1: %v %+v %v", paged, resp, err)
	}

	// A status: created with 201, listed newest first.
	st, resp, err := gh.Repositories.CreateDeploymentStatus(ctx, "acme", "app", first, &github.DeploymentStatusRequest{
		State: github.Ptr("in_progress"), Description: github.Ptr("applied by Flux"), LogURL: github.Ptr("https://ci.example/run/1"),
		EnvironmentURL: github.Ptr("https://shop.example"), AutoInactive: github.Ptr(false)})
	if err != nil || resp.StatusCode != http.StatusCreated || st.GetState() != "in_progress" || st.GetEnvironmentURL() != "https://shop.example" {
		t.Fatalf("create: %v %v", st, err)
	}
	statuses, _, err := gh.Repositories.ListDeploymentStatuses(ctx, "acme", "app", first, nil)
	if err != nil || len(statuses) != 2 || statuses[0].GetID() != st.GetID() || statuses[1].GetState() != "queued" ||
		statuses[1].GetLogURL() != "https://ci.example/run/1" || statuses[0].GetEnvironment() != "staging" {
		t.Fatalf("statuses: %v %v", statuses, err)
	}
	// GitHub: "Setting log_url will automatically set target_url to the same value."
	if statuses[0].GetTargetURL() != "https://ci.example/run/1" {
		t.Errorf("target_url %q, want the log_url", statuses[0].GetTargetURL())
	}

	// GitHub's validation: 140 characters at most (counted as characters), a known state.
	for name, req := range map[string]*github.DeploymentStatusRequest{
		"141 characters": {State: github.Ptr("success"), Description: github.Ptr(strings.Repeat("é", 141))},
		"unknown state":  {State: github.Ptr("done")},
		"no state":       {Description: github.Ptr("x")},
	} {
		_, resp, err := gh.Repositories.CreateDeploymentStatus(ctx, "acme", "app", first, req)
		var ghErr *github.ErrorResponse
		if !errors.As(err, &ghErr) || resp.StatusCode != http.StatusUnprocessableEntity {
			t.Errorf("%s: %v", name, err)
		}
	}
	// The description states the 140 characters only in prose: the double
	// refuses and reports those itself, the schema the other two.
	if v := fake.Violations(); len(v) != 3 {
		t.Errorf("violations %v, want the long description, the unknown state and the missing one", v)
	}
	if _, _, err := gh.Repositories.CreateDeploymentStatus(ctx, "acme", "app", first, &github.DeploymentStatusRequest{
		State: github.Ptr("in_progress"), Description: github.Ptr(strings.Repeat("é", 140))}); err != nil {
		t.Errorf("140 characters refused: %v", err)
	}
	if _, _, err := gh.Repositories.ListDeploymentStatuses(ctx, "acme", "app", 999999, nil); err == nil {
		t.Error("statuses of a missing deployment answered")
	}

	// auto_inactive (the default) marks earlier deployments of the
	// environment inactive, only those whose state is success.
	if _, _, err := gh.Repositories.CreateDeploymentStatus(ctx, "acme", "app", second, &github.DeploymentStatusRequest{State: github.Ptr("success")}); err != nil {
		t.Fatal(err)
	}
	if got := fake.Statuses("acme/app", first); got[len(got)-1].State != "in_progress" {
		t.Fatalf("auto_inactive changed an earlier deployment that had no success: %+v", got[len(got)-1])
	}
	if _, _, err := gh.Repositories.CreateDeploymentStatus(ctx, "acme", "app", first, &github.DeploymentStatusRequest{State: github.Ptr("success"), AutoInactive: github.Ptr(false)}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := gh.Repositories.CreateDeploymentStatus(ctx, "acme", "app", second, &github.DeploymentStatusRequest{State: github.Ptr("success")}); err != nil {
		t.Fatal(err)
	}
	if got := fake.Statuses("acme/app", first); got[len(got)-1].State != "inactive" {
		t.Fatalf("auto_inactive left %+v", got[len(got)-1])
	}
}

func TestDeploymentReadsRepeatAsFreeConditionalRequests(t *testing.T) {
	ctx := context.Background()
	fake := fakegithub.New(t)
	gh := client(t, fake, fake.URL())
	id := fake.AddDeployment("acme/app", fakegithub.NewDeployment{Ref: "v1"})
	_, resp, err := gh.Repositories.ListDeploymentStatuses(ctx, "acme", "app", id, nil)
	if err != nil {
		t.Fatal(err)
	}
	etag := resp.Header.Get("ETag")
	used := fake.RateLimitUsed()
	req, _ := gh.NewRequest(http.MethodGet, "repos/acme/app/deployments/"+itoa(id)+"/statuses", nil)
	req.Header.Set("If-None-Match", etag)
	resp, err = gh.Do(ctx, req, nil)
	if resp == nil || resp.StatusCode != http.StatusNotModified {
		t.Fatalf("conditional read: %v %v", resp, err)
	}
	if fake.RateLimitUsed() != used {
		t.Fatal("a 304 was charged")
	}
	// A new status changes the list and its ETag, and the deployment list's too.
	fake.AddStatus("acme/app", id, fakegithub.Status{State: "in_progress"})
	req, _ = gh.NewRequest(http.MethodGet, "repos/acme/app/deployments/"+itoa(id)+"/statuses", nil)
	req.Header.Set("If-None-Match", etag)
	if resp, err = gh.Do(ctx, req, nil); err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("ETag") == etag {
		t.Fatalf("changed list: %v %v", resp, err)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
