package fakegithub

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// maxStatusDescription is GitHub's limit on a deployment status's description,
// in characters.
const maxStatusDescription = 140

// deploymentStates are the states GitHub accepts for a deployment status.
var deploymentStates = []string{"error", "failure", "inactive", "in_progress", "queued", "pending", "success"}

// NewDeployment is what the workflow that creates a Deployment sends.
type NewDeployment struct {
	Ref, SHA, Task, Environment, Description string
	// Payload is the deployment's payload, a JSON value.
	Payload                                     json.RawMessage
	TransientEnvironment, ProductionEnvironment bool
}

// Status is one deployment status the fake holds.
type Status struct {
	ID                                         int64
	State, Description, Environment            string
	LogURL, EnvironmentURL, TargetURL, Creator string
	CreatedAt                                  time.Time
}

type deployment struct {
	id        int64
	spec      NewDeployment
	createdAt time.Time
	updatedAt time.Time
	// statuses, oldest first.
	statuses []Status
}

// creator is who the fake says made a deployment or status: a user as GitHub
// describes one (simple-user), every field it requires filled.
type creator struct {
	Login             string  `json:"login"`
	ID                int64   `json:"id"`
	NodeID            string  `json:"node_id"`
	AvatarURL         string  `json:"avatar_url"`
	GravatarID        *string `json:"gravatar_id"`
	URL               string  `json:"url"`
	HTMLURL           string  `json:"html_url"`
	FollowersURL      string  `json:"followers_url"`
	FollowingURL      string  `json:"following_url"`
	GistsURL          string  `json:"gists_url"`
	StarredURL        string  `json:"starred_url"`
	SubscriptionsURL  string  `json:"subscriptions_url"`
	OrganizationsURL  string  `json:"organizations_url"`
	ReposURL          string  `json:"repos_url"`
	EventsURL         string  `json:"events_url"`
	ReceivedEventsURL string  `json:"received_events_url"`
	Type              string  `json:"type"`
	SiteAdmin         bool    `json:"site_admin"`
}

func creatorOf(login string) creator {
	if login == "" {
		login = "estate-workflow[bot]"
	}
	const id = 41898282
	user := "https://api.github.com/users/" + url.PathEscape(login)
	empty := ""
	return creator{
		Login: login, ID: id, NodeID: "MDM6Qm90NDE4OTgyODI=", Type: "Bot",
		AvatarURL: "https://avatars.githubusercontent.com/in/" + strconv.Itoa(id) + "?v=4", GravatarID: &empty,
		URL: user, HTMLURL: "https://github.com/apps/" + url.PathEscape(strings.TrimSuffix(login, "[bot]")),
		FollowersURL: user + "/followers", FollowingURL: user + "/following{/other_user}",
		GistsURL: user + "/gists{/gist_id}", StarredURL: user + "/starred{/owner}{/repo}",
		SubscriptionsURL: user + "/subscriptions", OrganizationsURL: user + "/orgs", ReposURL: user + "/repos",
		EventsURL: user + "/events{/privacy}", ReceivedEventsURL: user + "/received_events",
	}
}

// deploymentBody is a deployment as the REST API answers it.
type deploymentBody struct {
	URL                   string          `json:"url"`
	ID                    int64           `json:"id"`
	NodeID                string          `json:"node_id"`
	SHA                   string          `json:"sha"`
	Ref                   string          `json:"ref"`
	Task                  string          `json:"task"`
	Payload               json.RawMessage `json:"payload"`
	OriginalEnvironment   string          `json:"original_environment"`
	Environment           string          `json:"environment"`
	Description           *string         `json:"description"`
	Creator               creator         `json:"creator"`
	CreatedAt             time.Time       `json:"created_at"`
	UpdatedAt             time.Time       `json:"updated_at"`
	StatusesURL           string          `json:"statuses_url"`
	RepositoryURL         string          `json:"repository_url"`
	TransientEnvironment  bool            `json:"transient_environment"`
	ProductionEnvironment bool            `json:"production_environment"`
}

// statusBody is a deployment status as the REST API answers it.
type statusBody struct {
	URL            string    `json:"url"`
	ID             int64     `json:"id"`
	NodeID         string    `json:"node_id"`
	State          string    `json:"state"`
	Creator        creator   `json:"creator"`
	Description    string    `json:"description"`
	Environment    string    `json:"environment"`
	TargetURL      string    `json:"target_url"`
	LogURL         string    `json:"log_url"`
	EnvironmentURL string    `json:"environment_url"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
	DeploymentURL  string    `json:"deployment_url"`
	RepositoryURL  string    `json:"repository_url"`
}

// AddDeployment creates a Deployment on a repository (created when missing),
// as the workflow that moves a pin does, and returns its id.
func (s *Server) AddDeployment(fullName string, d NewDeployment) int64 {
	s.AddRepository(fullName)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	if d.Task == "" {
		d.Task = "deploy"
	}
	if d.Environment == "" {
		d.Environment = "production"
	}
	if d.Payload == nil {
		d.Payload = json.RawMessage(`{}`)
	}
	now := s.now().UTC().Truncate(time.Second)
	repo := s.repos[fullName]
	repo.deployments = append(repo.deployments, &deployment{id: s.nextID, spec: d, createdAt: now, updatedAt: now})
	return s.nextID
}

// AddStatus writes a status as another writer (the workflow) would, without
// a request; it returns the status's id.
func (s *Server) AddStatus(fullName string, deploymentID int64, st Status) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.deploymentLocked(fullName, deploymentID)
	if d == nil {
		panic(fmt.Sprintf("fakegithub: no deployment %d in %s", deploymentID, fullName))
	}
	return s.addStatusLocked(d, st).ID
}

// Statuses lists a Deployment's statuses, oldest first.
func (s *Server) Statuses(fullName string, deploymentID int64) []Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.deploymentLocked(fullName, deploymentID)
	if d == nil {
		return nil
	}
	return append([]Status(nil), d.statuses...)
}

func (s *Server) deploymentLocked(fullName string, id int64) *deployment {
	repo, ok := s.repos[fullName]
	if !ok {
		return nil
	}
	for _, d := range repo.deployments {
		if d.id == id {
			return d
		}
	}
	return nil
}

func (s *Server) addStatusLocked(d *deployment, st Status) Status {
	s.nextID++
	st.ID = s.nextID
	st.CreatedAt = s.now().UTC().Truncate(time.Second)
	if st.Environment == "" {
		st.Environment = d.spec.Environment
	}
	d.spec.Environment = st.Environment
	d.statuses = append(d.statuses, st)
	d.updatedAt = st.CreatedAt
	return st
}

func (s *Server) deploymentBody(r *http.Request, d *deployment) deploymentBody {
	repoURL := "http://" + r.Host + "/repos/" + r.PathValue("owner") + "/" + r.PathValue("repo")
	self := repoURL + "/deployments/" + strconv.FormatInt(d.id, 10)
	var description *string
	if d.spec.Description != "" {
		description = &d.spec.Description
	}
	return deploymentBody{
		URL: self, ID: d.id, NodeID: "DE_" + strconv.FormatInt(d.id, 10), SHA: d.spec.SHA, Ref: d.spec.Ref,
		Task: d.spec.Task, Payload: d.spec.Payload, OriginalEnvironment: d.spec.Environment,
		Environment: d.spec.Environment, Description: description, Creator: creatorOf(""),
		CreatedAt: d.createdAt, UpdatedAt: d.updatedAt, StatusesURL: self + "/statuses", RepositoryURL: repoURL,
		TransientEnvironment: d.spec.TransientEnvironment, ProductionEnvironment: d.spec.ProductionEnvironment,
	}
}

func (s *Server) statusBody(r *http.Request, d *deployment, st Status) statusBody {
	repoURL := "http://" + r.Host + "/repos/" + r.PathValue("owner") + "/" + r.PathValue("repo")
	deploymentURL := repoURL + "/deployments/" + strconv.FormatInt(d.id, 10)
	return statusBody{
		URL: deploymentURL + "/statuses/" + strconv.FormatInt(st.ID, 10), ID: st.ID,
		NodeID: "DES_" + strconv.FormatInt(st.ID, 10), State: st.State, Creator: creatorOf(st.Creator),
		Description: st.Description, Environment: st.Environment, TargetURL: st.TargetURL, LogURL: st.LogURL,
		EnvironmentURL: st.EnvironmentURL, CreatedAt: st.CreatedAt, UpdatedAt: st.CreatedAt,
		DeploymentURL: deploymentURL, RepositoryURL: repoURL,
	}
}

// page reads per_page (default 30, at most 100) and page (from 1) as GitHub
// does, and sets the Link header naming the next and last pages.
func page[T any](w http.ResponseWriter, r *http.Request, items []T) ([]T, bool) {
	q := r.URL.Query()
	perPage, pageNo := 30, 1
	if v := q.Get("per_page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			writeError(w, http.StatusUnprocessableEntity, "per_page must be a positive integer")
			return nil, false
		}
		perPage = min(n, 100)
	}
	if v := q.Get("page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			writeError(w, http.StatusUnprocessableEntity, "page must be a positive integer")
			return nil, false
		}
		pageNo = n
	}
	last := max((len(items)+perPage-1)/perPage, 1)
	link := func(n int) string {
		u := url.URL{Scheme: "http", Host: r.Host, Path: r.URL.Path}
		v := r.URL.Query()
		v.Set("page", strconv.Itoa(n))
		v.Set("per_page", strconv.Itoa(perPage))
		u.RawQuery = v.Encode()
		return u.String()
	}
	if pageNo < last {
		w.Header().Set("Link", fmt.Sprintf(`<%s>; rel="next", <%s>; rel="last"`, link(pageNo+1), link(last)))
	}
	start := min((pageNo-1)*perPage, len(items))
	return items[start:min(start+perPage, len(items))], true
}

// listDeployments serves GET /repos/{owner}/{repo}/deployments: newest first,
// filtered by sha, ref, task and environment.
func (s *Server) listDeployments(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	repo, ok := s.lookup(w, r, "")
	if !ok {
		return
	}
	q := r.URL.Query()
	var matching []*deployment
	for _, d := range slices.Backward(repo.deployments) {
		if f := q.Get("sha"); f != "" && f != d.spec.SHA {
			continue
		}
		if f := q.Get("ref"); f != "" && f != d.spec.Ref {
			continue
		}
		if f := q.Get("task"); f != "" && f != d.spec.Task {
			continue
		}
		if f := q.Get("environment"); f != "" && f != d.spec.Environment {
			continue
		}
		matching = append(matching, d)
	}
	items, ok := page(w, r, matching)
	if !ok {
		return
	}
	out := make([]deploymentBody, 0, len(items))
	for _, d := range items {
		out = append(out, s.deploymentBody(r, d))
	}
	writeCacheable(w, r, out)
}

func (s *Server) deploymentOf(w http.ResponseWriter, r *http.Request) (*deployment, bool) {
	if _, ok := s.lookup(w, r, ""); !ok {
		return nil, false
	}
	id, err := strconv.ParseInt(r.PathValue("deployment_id"), 10, 64)
	d := s.deploymentLocked(r.PathValue("owner")+"/"+r.PathValue("repo"), id)
	if err != nil || d == nil {
		writeError(w, http.StatusNotFound, "Not Found")
		return nil, false
	}
	return d, true
}

// listStatuses serves GET .../deployments/{id}/statuses, newest first.
func (s *Server) listStatuses(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.deploymentOf(w, r)
	if !ok {
		return
	}
	newest := slices.Clone(d.statuses)
	slices.Reverse(newest)
	items, ok := page(w, r, newest)
	if !ok {
		return
	}
	out := make([]statusBody, 0, len(items))
	for _, st := range items {
		out = append(out, s.statusBody(r, d, st))
	}
	writeCacheable(w, r, out)
}

// statusRequest is the body of POST .../deployments/{id}/statuses.
type statusRequest struct {
	State          *string `json:"state"`
	TargetURL      string  `json:"target_url"`
	LogURL         string  `json:"log_url"`
	Description    string  `json:"description"`
	Environment    string  `json:"environment"`
	EnvironmentURL string  `json:"environment_url"`
	AutoInactive   *bool   `json:"auto_inactive"`
}

// createStatus serves POST .../deployments/{id}/statuses. As GitHub does, it
// refuses an unknown state and a description over 140 characters with 422,
// and with auto_inactive (the default) a success marks the repository's
// earlier non-transient, non-production deployments of the same environment
// inactive.
func (s *Server) createStatus(w http.ResponseWriter, r *http.Request) {
	var req statusRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "Problems parsing JSON")
		return
	}
	switch {
	case req.State == nil:
		writeError(w, http.StatusUnprocessableEntity, "Invalid request.\n\n\"state\" wasn't supplied.")
		return
	case !slices.Contains(deploymentStates, *req.State):
		writeError(w, http.StatusUnprocessableEntity, fmt.Sprintf("Validation Failed: state %q is not a member of %v", *req.State, deploymentStates))
		return
	case utf8.RuneCountInString(req.Description) > maxStatusDescription:
		// The limit is in the description's prose, not its schema, so the
		// request passed validation: it is reported here instead.
		s.violate(fmt.Errorf("request %s %s: a status description of %d characters; GitHub takes at most %d",
			r.Method, r.URL.Path, utf8.RuneCountInString(req.Description), maxStatusDescription))
		writeError(w, http.StatusUnprocessableEntity, "Validation Failed: description is too long (maximum is 140 characters)")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.deploymentOf(w, r)
	if !ok {
		return
	}
	// GitHub: "Setting log_url will automatically set target_url to the
	// same value."
	target := req.TargetURL
	if req.LogURL != "" {
		target = req.LogURL
	}
	st := s.addStatusLocked(d, Status{
		State: *req.State, Description: req.Description, Environment: req.Environment, LogURL: req.LogURL,
		EnvironmentURL: req.EnvironmentURL, TargetURL: target, Creator: "delivery-app[bot]",
	})
	if st.State == "success" && (req.AutoInactive == nil || *req.AutoInactive) {
		// Only earlier Deployments whose state is success are made inactive.
		repo := s.repos[r.PathValue("owner")+"/"+r.PathValue("repo")]
		for _, other := range repo.deployments {
			if other.id < d.id && other.spec.Environment == d.spec.Environment &&
				!other.spec.TransientEnvironment && !other.spec.ProductionEnvironment &&
				len(other.statuses) > 0 && other.statuses[len(other.statuses)-1].State == "success" {
				s.addStatusLocked(other, Status{State: "inactive", Creator: "github"})
			}
		}
	}
	writeJSON(w, http.StatusCreated, s.statusBody(r, d, st))
}
