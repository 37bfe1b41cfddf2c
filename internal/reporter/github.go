package reporter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/go-github/v75/github"

	"github.com/JorisJonkers-dev/delivery/internal/githubapp"

	"github.com/JorisJonkers-dev/delivery/internal/releasepath"
)

// Deployment is a GitHub Deployment as the Reporter reads it.
type Deployment struct {
	ID        int64
	Payload   json.RawMessage
	CreatedAt time.Time
}

// Statuses is what a Deployment's statuses say: the latest, and the log_url
// the first status that had one gave (the workflow's run).
type Statuses struct {
	Latest *releasepath.Status
	LogURL string
}

// Deployments is what the Reporter needs of GitHub's deployments API.
type Deployments interface {
	// List returns one page of a repository's Deployments, newest first, and
	// the next page's number (0 after the last).
	List(ctx context.Context, repo githubapp.Repository, page int) ([]Deployment, int, error)
	// Statuses reads a Deployment's statuses.
	Statuses(ctx context.Context, repo githubapp.Repository, id int64) (Statuses, error)
	// Write adds a status to a Deployment, carrying logURL.
	Write(ctx context.Context, repo githubapp.Repository, id int64, s releasepath.Status, logURL string) error
}

// perPage is GitHub's largest page: the fewest requests per list.
const perPage = 100

// GitHub reaches the deployments API through go-github. Every read is a
// conditional request (githubapp's transport), so a list or statuses page
// that did not change is answered 304 and costs no rate-limit unit.
type GitHub struct {
	gh *github.Client
}

var _ Deployments = (*GitHub)(nil)

// NewGitHub reads and writes Deployments as the App installation c.
func NewGitHub(c *githubapp.Client) *GitHub { return &GitHub{gh: c.GitHub()} }

// List returns one page of Deployments.
func (g *GitHub) List(ctx context.Context, repo githubapp.Repository, page int) ([]Deployment, int, error) {
	list, resp, err := g.gh.Repositories.ListDeployments(ctx, repo.Owner, repo.Name,
		&github.DeploymentsListOptions{ListOptions: github.ListOptions{Page: page, PerPage: perPage}})
	if err != nil {
		var ghErr *github.ErrorResponse
		if errors.As(err, &ghErr) && ghErr.Response != nil && ghErr.Response.StatusCode == http.StatusNotFound {
			// GitHub answers 404 for a repository the installation cannot see.
			return nil, 0, fmt.Errorf("the installation cannot see repository %s: %w", repo, ErrNotFound)
		}
		return nil, 0, fmt.Errorf("list the Deployments of %s: %w", repo, err)
	}
	out := make([]Deployment, 0, len(list))
	for _, d := range list {
		out = append(out, Deployment{ID: d.GetID(), Payload: d.Payload, CreatedAt: d.GetCreatedAt().Time})
	}
	return out, resp.NextPage, nil
}

// Statuses reads the newest page of a Deployment's statuses. A Deployment
// carries one status per stage it went through, far fewer than a page.
func (g *GitHub) Statuses(ctx context.Context, repo githubapp.Repository, id int64) (Statuses, error) {
	list, _, err := g.gh.Repositories.ListDeploymentStatuses(ctx, repo.Owner, repo.Name, id, &github.ListOptions{PerPage: perPage})
	if err != nil {
		return Statuses{}, fmt.Errorf("read the statuses of Deployment %d of %s: %w", id, repo, refusal(err))
	}
	var out Statuses
	if len(list) > 0 {
		l := list[0]
		out.Latest = &releasepath.Status{State: l.GetState(), Description: l.GetDescription(), EnvironmentURL: l.GetEnvironmentURL()}
	}
	for i := len(list) - 1; i >= 0; i-- {
		if u := list[i].GetLogURL(); u != "" {
			out.LogURL = u
			break
		}
	}
	return out, nil
}

// Write adds a status. auto_inactive is off: marking other Deployments
// inactive is not the Reporter's to do, and GitHub would do it across every
// Project that shares the repository and environment.
func (g *GitHub) Write(ctx context.Context, repo githubapp.Repository, id int64, s releasepath.Status, logURL string) error {
	req := &github.DeploymentStatusRequest{
		State: github.Ptr(s.State), Description: github.Ptr(s.Description), AutoInactive: github.Ptr(false),
	}
	if logURL != "" {
		req.LogURL = github.Ptr(logURL)
	}
	if s.EnvironmentURL != "" {
		req.EnvironmentURL = github.Ptr(s.EnvironmentURL)
	}
	if _, _, err := g.gh.Repositories.CreateDeploymentStatus(ctx, repo.Owner, repo.Name, id, req); err != nil {
		return fmt.Errorf("write %s to Deployment %d of %s: %w", s.State, id, repo, refusal(err))
	}
	return nil
}

// ErrRefused marks GitHub refusing a request for what it is (an archived
// repository is read-only, a Deployment gone): asking again next pass gets
// the same answer, so the unit is skipped rather than failing every pass.
var ErrRefused = errors.New("GitHub refuses it")

// refusal marks err with ErrRefused when GitHub answered 403 (not for a
// rate limit: an archived repository, one outside the App's reach), 404, 410
// or 422. A rate limit, 401 and 5xx stay errors of the pass. A permission
// the App lacks everywhere is a 403 too; Pass fails when every unit meets
// one.
func refusal(err error) error {
	var rate *github.RateLimitError
	var abuse *github.AbuseRateLimitError
	if errors.As(err, &rate) || errors.As(err, &abuse) {
		return err
	}
	var ghErr *github.ErrorResponse
	if !errors.As(err, &ghErr) || ghErr.Response == nil {
		return err
	}
	switch ghErr.Response.StatusCode {
	case http.StatusForbidden, http.StatusNotFound, http.StatusGone, http.StatusUnprocessableEntity:
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	return err
}
